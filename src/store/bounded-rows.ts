/**
 * A page's rows, read one at a time: at most `limit`, and past the first no more than `budget`
 * bytes of their JSON as written (escapes can make a row several times its text), so a page
 * never holds much more than its budget. `more`: rows were left; `last`: the last row taken (a
 * cursor's). The statement is stopped when the page ends early.
 */
export function boundedRows<R, T>(
  rows: IterableIterator<R>,
  limit: number,
  budget: number,
  shape: (row: R) => T,
): { items: T[]; last: R | undefined; more: boolean } {
  const items: T[] = [];
  let last: R | undefined;
  let bytes = 0;
  let more = false;
  for (const row of rows) {
    if (items.length === limit) {
      more = true;
      break;
    }
    const item = shape(row);
    const size = Buffer.byteLength(JSON.stringify(item)) + 1;
    if (items.length > 0 && bytes + size > budget) {
      more = true;
      break;
    }
    items.push(item);
    bytes += size;
    last = row;
  }
  rows.return?.();
  return { items, last, more };
}
