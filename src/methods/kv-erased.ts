import { kvDirOf } from "../plan/decide/slot-save.ts";
import { CoreError } from "../protocol/errors.ts";
import { kvLeftText } from "../protocol/kv-left.ts";
import { listedNames } from "../util/listed-names.ts";
import type { Services } from "./services.ts";

/**
 * An erase never answers ok while a saved KV state of it stays on disk (docs/protocol.md,
 * `users.delete`): a file that could not be removed fails the delete, naming it; sending the
 * delete again tries again. Seen with data_dir/kv not writable: `deleted: true`, the session's
 * tokens still readable there, and never tried again. Removed, the files are zeroed off the loop
 * (agent/kv/drop-file.ts); the delete answers once that is done, as their blocks held the tokens.
 */
export async function kvErased(
  left: readonly string[],
  services: Pick<Services, "kvZeroed" | "config">,
): Promise<void> {
  await services.kvZeroed?.(left);
  if (left.length === 0) return;
  const data = kvLeftData(left, kvDirOf(services.config().app.data_dir));
  throw new CoreError(
    "internal_error",
    `the rows are erased, but ${kvLeftText(data)}; send the delete again once they can be`,
    data,
  );
}

/**
 * What an erase left: the files it could not remove (`file`, the first; `files`, as a listing's
 * names are, util/listed-names.ts `listedNames`), and `folder` when an erase over several turns
 * failed part way (kv-disk.ts `erase` reports the folder itself): which of its files stayed cannot
 * be told. It was named as `data.file` of "1 saved KV state file(s)", a folder shown as a file.
 */
function kvLeftData(left: readonly string[], dir: string): Record<string, unknown> {
  const files = left.filter((path) => path !== dir);
  return {
    key: "app.data_dir",
    ...(files.length > 0 ? { file: files[0] } : {}),
    ...listedNames("files", files),
    ...(files.length < left.length ? { folder: dir } : {}),
  };
}
