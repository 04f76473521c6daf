/**
 * Small readers of the core's stdout lines for the connection (connection.ts): the id a line
 * carries, and a line clipped for a log message.
 */

/** The id a line's start carries as the core writes it (`{"id":7,` or `{"id":"x",`), as pending keys are. */
export function idOfLine(head: string): string | undefined {
  const m = /^\{"id":(-?\d[\d.eE+-]*|"(?:[^"\\]|\\.)*")[,}]/.exec(head);
  if (!m) return undefined;
  try {
    const id = JSON.parse(m[1]!) as unknown;
    return typeof id === "string" || typeof id === "number" ? String(id) : undefined;
  } catch {
    return undefined;
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function clip(line: string): string {
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
