/**
 * Names a message or an error's data lists, bounded: a hostile repo of 100,000 files made an
 * error line of megabytes (docs/models.md "Pull"), and a snapshot or a folder holds any number.
 */

/** The most names an error's data lists. */
const NAMES_LISTED = 100;

/** `names` as an error's data gives them: the first NAMES_LISTED under `key`, all counted in `<key>_count`. */
export function listedNames(key: string, names: readonly string[]): Record<string, unknown> {
  return { [key]: names.slice(0, NAMES_LISTED), [`${key}_count`]: names.length };
}

/** The first `max` names for a message, `… (N in all)` after them when there are more. */
export function namesText(names: readonly string[], max = 20, separator = ", "): string {
  return firstNames(
    names,
    max,
    (n) => n,
    separator,
    (all) => `${separator}… (${all} in all)`,
  );
}

/** A few names quoted, and how many more (`'a', 'b', 'c' and 2 more`): a config's names in a warning. */
export function quotedNames(names: readonly string[]): string {
  return firstNames(
    names,
    QUOTED_NAMES,
    (n) => `'${n}'`,
    ", ",
    (all) => ` and ${all - QUOTED_NAMES} more`,
  );
}

/** The names a config warning quotes; the rest are counted. */
const QUOTED_NAMES = 3;

/** The first `max` names, each as `show` spells it, joined, and `more` of the whole count past them. */
function firstNames(
  names: readonly string[],
  max: number,
  show: (name: string) => string,
  separator: string,
  more: (all: number) => string,
): string {
  const shown = names.slice(0, max).map(show).join(separator);
  return names.length > max ? `${shown}${more(names.length)}` : shown;
}
