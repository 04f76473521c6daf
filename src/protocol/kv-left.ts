/**
 * What an erase of saved KV state left, as a delete's failure says it (`methods/kv-erased.ts`
 * makes its `data`: `files`, cut at 100, `files_count`, `folder`) and a cancelled add's
 * (`documents/add-document.ts`): the first three files named and all counted; an erase that
 * failed part way said of the folder, never as one of its files. `what` qualifies the states.
 */
export function kvLeftText(data: Record<string, unknown>, what = ""): string {
  const files = (data.files as string[] | undefined) ?? [];
  const count = (data.files_count as number | undefined) ?? files.length;
  const said: string[] = [];
  // Counted from `files_count`: `files` is cut at 100.
  const named = `${files.slice(0, 3).join(", ")}${count > 3 ? `, … (${count} in all)` : ""}`;
  if (count > 0)
    said.push(
      `${count} saved KV state file${count === 1 ? "" : "s"}${what} could not be removed (${named}; see the core's log for why)`,
    );
  if (typeof data.folder === "string")
    said.push(
      `the erase of saved KV states${what} failed part way over ${data.folder}, which of its files stayed cannot be told (see the core's log for why)`,
    );
  return said.join(", and ");
}
