// What an embedding request's failure says of its inputs (store/memory-embedder.ts narrows a
// batch by it): one too long, one the model cannot embed, or a server that died with them.

/** The place of an input the server refused as too long, and how much of it to keep. */
export function tooLong(err: unknown): { index: number; ratio: number } | undefined {
  const data = (err as { data?: Record<string, unknown> }).data;
  const field = data?.field;
  const index = data?.index;
  if (typeof field !== "string" || !field.startsWith("input.") || typeof index !== "number") return undefined;
  // Refused for what it is, not its length: shortened, it would be sent again.
  if (data?.reason !== undefined) return undefined;
  const n = Number(data?.n_tokens);
  const max = Number(data?.max_tokens);
  const ratio = n > 0 && max > 0 && max < n ? (max / n) * 0.9 : 0.5;
  return { index, ratio };
}

/**
 * An input the model cannot embed at any length: the server crashed on it each time it was sent
 * (server/embed-suspects.ts), or the model gave it a vector holding NaN or infinity (garbage,
 * never stored; cut, it would be sent again and its half's vector kept as the row's).
 */
export function cannotEmbed(err: unknown): "crashes_server" | "not_finite" | undefined {
  const reason = (err as { data?: Record<string, unknown> }).data?.reason;
  return reason === "crashes_server" || reason === "not_finite" ? reason : undefined;
}

/** The server died (or its connection was lost) with the request in flight: an input may be why. */
export function serverDied(err: unknown): boolean {
  const reason = (err as { data?: Record<string, unknown> }).data?.reason;
  return reason === "server_failed" || reason === "connection_lost";
}
