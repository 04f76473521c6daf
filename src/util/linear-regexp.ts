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

/**
 * Why RE2 cannot take the pattern's syntax (lookaround, a backreference), or undefined when it
 * can. Its counted repeats are read as `{1}`: compiled at their counts, a pattern of 7 KB can
 * expand to a million instructions and half a second of compiling, on the loop of whoever asks;
 * whether RE2 takes their counts and size is for the compile that uses the pattern
 * (docs/protocol.md, Structured output: the validator's thread).
 */
export function linearRegExpProblem(pattern: string): string | undefined {
  try {
    linearRegExp(withUnitRepeats(pattern));
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The pattern with each `{n}`, `{n,}`, `{n,m}` outside a class and not escaped made `{1}`, `{1,}`, `{1,1}`. */
function withUnitRepeats(pattern: string): string {
  let out = "";
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === "\\") {
      out += pattern.slice(i, i + 2);
      i++;
    } else if (inClass) {
      out += c;
      if (c === "]") inClass = false;
    } else if (c === "[") {
      inClass = true;
      out += c;
      // A `]` first in a class (or after `^`) is a member, not its end.
      const first = pattern[i + 1] === "^" ? 2 : 1;
      if (pattern[i + first] === "]") {
        out += pattern.slice(i + 1, i + first + 1);
        i += first;
      }
    } else {
      const repeat = c === "{" ? /^\{\d+(,\d*)?\}/.exec(pattern.slice(i, i + 32)) : null;
      if (!repeat) out += c;
      else {
        out += repeat[1] === undefined ? "{1}" : repeat[1] === "," ? "{1,}" : "{1,1}";
        i += repeat[0].length - 1;
      }
    }
  }
  return out;
}
