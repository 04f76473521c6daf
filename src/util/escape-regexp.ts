/** `text` as a regular expression that matches it literally (its special characters escaped). */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Most of a regular expression's source: JavaScriptCore refuses one of about a megabyte or more
 * ("regular expression too large"), as every spelling of 100 KiB of `--mcp-servers-json` made
 * it, thrown after llama-server's spawn with the child left running.
 */
const PATTERN_CHARS = 256 * 1024;

/**
 * Replaces each of `literals` (the longest first, as given) in a text by `mark`: one pattern for
 * each run of them whose sources fit PATTERN_CHARS together, a later pattern's shorter literals not
 * looked for inside a mark an earlier one left.
 */
export function literalReplacer(literals: readonly string[], mark: string): (text: string) => string {
  if (literals.length === 0) return (text) => text;
  const groups: string[][] = [];
  let chars = Number.POSITIVE_INFINITY;
  for (const source of literals.map(escapeRegExp)) {
    if (chars + source.length > PATTERN_CHARS) {
      groups.push([]);
      chars = 0;
    }
    groups.at(-1)!.push(source);
    chars += source.length + 1;
  }
  const patterns = groups.map((g) => new RegExp(g.join("|"), "g"));
  if (patterns.length === 1) return (text) => text.replace(patterns[0] as RegExp, mark);
  return (text) =>
    patterns.reduce(
      (t, pattern) =>
        t
          .split(mark)
          .map((part) => part.replace(pattern, mark))
          .join(mark),
      text,
    );
}
