import { CoreError } from "../protocol/errors.ts";
import type { Services } from "./services.ts";

/**
 * An erase never answers ok while a saved KV state of it stays on disk (docs/protocol.md,
 * `users.delete`): a file that could not be removed fails the delete, naming it; sending the
 * delete again tries again. Seen with data_dir/kv not writable: `deleted: true`, the session's
 * tokens still readable there, and never tried again. Removed, the files are zeroed off the loop
 * (agent/kv/drop-file.ts); the delete answers once that is done, as their blocks held the tokens.
 */
export async function kvErased(left: readonly string[], services: Pick<Services, "kvZeroed">): Promise<void> {
  await services.kvZeroed?.(left);
  if (left.length === 0) return;
  throw new CoreError(
    "internal_error",
    `the rows are erased, but ${left.length} saved KV state file(s) could not be removed (${left[0]}; see the core's log for why); send the delete again once they can be`,
    { key: "app.data_dir", file: left[0], files: left },
  );
}
