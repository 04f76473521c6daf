import { Database } from "bun:sqlite";
import { integrityProblem } from "./open.ts";

/** What `doctor` learns by reading the database file (doctor/store-check.ts words it). */
export type FileVerdict =
  | { kind: "unmade" }
  | { kind: "damaged"; problem: string }
  | { kind: "reset"; from: string }
  | { kind: "ok" }
  | { kind: "unreadable"; message: string; code?: string };

/**
 * The database at `path` opened read-only (diagnosing changes nothing, and a running core may hold
 * it) and read whole by `quick_check`: run on the store's thread (store/chunk-thread.ts), since
 * on a file of several GB it takes seconds.
 */
export function checkFile(path: string): FileVerdict {
  let db: Database | undefined;
  try {
    db = new Database(path, { readonly: true });
    // No table at all: a core stopped during its first open (killed, a power cut) left the file
    // begun; the next open makes the schema in it as in a new one (store/db/open.ts).
    if (!db.query("SELECT 1 FROM sqlite_schema LIMIT 1").get()) return { kind: "unmade" };
    const problem = integrityProblem(db);
    if (problem) return { kind: "damaged", problem };
    const reset = db.query("SELECT value FROM meta WHERE key = 'reset_from'").get() as {
      value: string;
    } | null;
    return reset ? { kind: "reset", from: reset.value } : { kind: "ok" };
  } catch (err) {
    // SQLite's code (`SQLITE_READONLY_ROLLBACK`: a hot journal) says what went wrong; its wording may not.
    const { message, code } = err as { message: string; code?: string };
    return { kind: "unreadable", message, code };
  } finally {
    db?.close();
  }
}
