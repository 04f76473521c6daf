/**
 * A /proc/<pid>/stat line's fields after `comm` (index 0 is the state, field 3 overall): comm,
 * field 2, may hold spaces and parentheses, so they start after its last ')'.
 */
export function statFieldsOf(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}
