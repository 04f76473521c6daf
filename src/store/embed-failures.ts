// What an embedding request's failure says of its inputs (store/memory-embedder.ts narrows a
// batch by it): one too long (shortened and sent again here), one the model cannot embed, or a
// server that died with them.

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

/** Times an input the server finds too long is shortened before its batch goes a row at a time (or, alone, is refused). */
const SHORTEN_TRIES = 3;

/**
 * One request (store/memory-embedder.ts `embed`), an input the server finds too long shortened
 * by the ratio it gives and sent again. Null: a spare ask found no free room.
 */
export async function embedShortened(
  embed: (texts: string[], signal: AbortSignal, spare?: boolean) => Promise<number[][] | null>,
  texts: string[],
  signal: AbortSignal,
  spare = false,
): Promise<number[][] | null> {
  for (let tries = 0; ; tries++) {
    try {
      return await embed(texts, signal, spare);
    } catch (err) {
      const i = tooLong(err);
      const text = i === undefined ? undefined : texts[i.index];
      const cut = text?.slice(0, Math.floor(text.length * (i?.ratio ?? 0)));
      // Cut to nothing, it would get a vector that means nothing: refused instead.
      if (!cut || i === undefined || tries >= SHORTEN_TRIES) throw err;
      texts[i.index] = cut;
    }
  }
}
