import type { RE2JS } from "re2js";

/**
 * Regular expressions matched in linear time (RE2, through `re2js`), for patterns a host or a
 * model chooses: a backtracking engine takes exponential time on `^(a+)+$` against `aaaa…!`.
 * RE2 has no lookaround and no backreferences; such a pattern does not compile here and is
 * refused before it is used (docs/protocol.md, Structured output). Loaded on first use.
 */

/** `test(s)`: whether the pattern matches anywhere in `s`, as `RegExp.prototype.test` answers. */
export interface LinearRegExp {
  test(s: string): boolean;
  toString(): string;
}

let engine: typeof RE2JS | undefined;

function re2(): typeof RE2JS {
  engine ??= (require("re2js") as typeof import("re2js")).RE2JS;
  return engine;
}

/** The pattern (ECMAScript syntax; flags: `i` is honoured, `u` is RE2's own way) compiled; throws RE2's reason. */
export function linearRegExp(pattern: string, flags = ""): LinearRegExp {
  const R = re2();
  const compiled = R.compile(R.translateRegExp(pattern), flags.includes("i") ? R.CASE_INSENSITIVE : 0);
  // Ajv keys compiled patterns by their text: two patterns must not print alike.
  const text = `/${pattern}/${flags}`;
  return { test: (s) => compiled.test(s), toString: () => text };
}

/** Why RE2 cannot take the pattern, or undefined when it can. */
export function linearRegExpProblem(pattern: string): string | undefined {
  try {
    linearRegExp(pattern);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
