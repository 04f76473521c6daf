/**
 * What a failed request's error says, in a few words for a message: its code (ECONNRESET,
 * ConnectionRefused) when it has one, else the first line of its message, cut to `max`.
 */
export function causeText(err: unknown, max: number): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === "string" && e.code) return e.code;
  return String(e?.message ?? err)
    .split("\n")[0]!
    .slice(0, max);
}
