/**
 * How deep a peer's parsed JSON may nest before the core stringifies it. JSON.parse reads any
 * depth, but JSON.stringify recurses: past about 50,000 levels it throws RangeError, and each
 * throw held the main loop 0.6 s (a hostile review: an MCP server's input schema or structured
 * result, in a line of 100 KB). A real schema or result nests a few dozen levels.
 */
export const MAX_JSON_DEPTH = 512;

/** Whether `value` nests arrays and objects more than `limit` levels deep; no recursion, stops at the first too deep. */
export function nestedDeeperThan(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop() as number;
    if (typeof v !== "object" || v === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(v)) {
      values.push(child);
      depths.push(depth + 1);
    }
  }
  return false;
}
