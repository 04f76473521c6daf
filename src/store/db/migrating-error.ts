import { CoreError } from "../../protocol/errors.ts";

/**
 * The store asked for at once (a sync path the dispatcher's wait did not cover) while its
 * migrations run on their thread: named, to be sent again, never a second connection waiting
 * on the thread's write lock with the loop held (docs/agent.md, The store, "Migrations off the loop").
 */
export function migratingError(dataDir: string): CoreError {
  return new CoreError(
    "internal_error",
    `the database in ${dataDir} is being brought up to date for this version; send it again in a moment`,
    { key: "app.data_dir", problem: "migrating" },
  );
}
