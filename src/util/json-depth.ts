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
    // Only objects and arrays can nest: a value each for an array's 100,000 numbers held the loop
    // tens of milliseconds (a tool's 14 MB of them, seconds).
    const children: unknown[] = Array.isArray(v) ? v : Object.values(v);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (typeof child !== "object" || child === null) continue;
      values.push(child);
      depths.push(depth + 1);
    }
  }
  return false;
}
