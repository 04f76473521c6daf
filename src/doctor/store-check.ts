import { Database } from "bun:sqlite";
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { fsProblemText } from "../store/data-dir-problem.ts";
import { DB_FILE, damagedMarker, integrityProblem } from "../store/db/open.ts";
import type { Check } from "./checks.ts";

/** Whether this SQLite has FTS5 (an in-memory probe: nothing on disk is touched). */
export function sqliteHasFts5(): boolean {
  const db = new Database(":memory:");
  try {
    db.run("CREATE VIRTUAL TABLE t USING fts5(x)");
    return true;
  } catch {
    return false;
  } finally {
    db.close();
  }
}

/**
 * The conversation database (docs/agent.md, The store): whether it opens and passes
 * `quick_check` (read-only: diagnosing changes nothing, and a running core may hold it), whether
 * it was reset or marked damaged, and whether search has FTS5 or falls back to LIKE.
 */
export function storeCheck(config: Config, hasFts5 = sqliteHasFts5()): Check {
  const path = join(config.app.data_dir, DB_FILE);
  const fts = hasFts5 ? "FTS5 search" : "no FTS5 in this SQLite: search and memory use a plain LIKE match";
  const data: Record<string, unknown> = { path, fts5: hasFts5 };
  const status = hasFts5 ? "ok" : "warn";
  if (!existsSync(path)) {
    return {
      id: "store",
      status,
      message: `no conversation database yet (made at the first chat); ${fts}`,
      data,
    };
  }
  if (existsSync(damagedMarker(path))) {
    const why = readFileSync(damagedMarker(path), "utf8").trim();
    return {
      id: "store",
      status: "warn",
      message: `the database ${path} met damage (${why}); it is set aside at the core's next start and a fresh one made`,
      fix: "restart the core; the damaged file is kept as local-ai.db.corrupt-<time>",
      data,
    };
  }
  const locked = unwritable(path);
  if (locked) {
    return {
      id: "store",
      status: "fail",
      message: `the database file ${locked.file} cannot be written: ${fsProblemText(locked.problem)}; chats, documents.add and deletes fail until it can`,
      fix: "make it writable by the user the core runs as (its mode or owner, chattr -i, a read-write mount)",
      data: { ...data, file: locked.file, problem: locked.problem },
    };
  }
  let db: Database | undefined;
  try {
    db = new Database(path, { readonly: true });
    // No table at all: a core stopped during its first open (killed, a power cut) left the file
    // begun; the next open makes the schema in it as in a new one (store/db/open.ts).
    if (!db.query("SELECT 1 FROM sqlite_schema LIMIT 1").get()) {
      return {
        id: "store",
        status,
        message: `the database ${path} is begun but not made yet (a core stopped during its first open); the next start makes it; ${fts}`,
        data,
      };
    }
    const problem = integrityProblem(db);
    if (problem) {
      return {
        id: "store",
        status: "fail",
        message: `the database ${path} is damaged (${problem}); it is set aside at the core's next start and a fresh one made`,
        fix: "restart the core; the damaged file is kept as local-ai.db.corrupt-<time>",
        data,
      };
    }
    return resetOrOk(db, path, status, fts, data);
  } catch (err) {
    return {
      id: "store",
      status: "fail",
      message: `the database ${path} cannot be read: ${(err as Error).message}`,
      fix: "check the file's permissions, or move it aside for the core to start a fresh one",
      data,
    };
  } finally {
    db?.close();
  }
}

function resetOrOk(
  db: Database,
  path: string,
  status: Check["status"],
  fts: string,
  data: Record<string, unknown>,
): Check {
  const reset = db.query("SELECT value FROM meta WHERE key = 'reset_from'").get() as { value: string } | null;
  if (reset) {
    return {
      id: "store",
      status: "warn",
      message: `the conversation database was unusable and was reset; the old file is kept at ${reset.value}; ${fts}`,
      fix: "inspect or delete the kept file; the sessions in it are not in the new database",
      data: { ...data, reset_from: reset.value },
    };
  }
  return { id: "store", status, message: `${path} is healthy; ${fts}`, data };
}

/**
 * The first of the database's files (its log and the log's index too, when there) this user
 * cannot write: the quick_check reads, and a read-only file passed it while every write failed.
 */
function unwritable(path: string): { file: string; problem: string } | undefined {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      accessSync(file, constants.W_OK);
    } catch (err) {
      const problem = (err as NodeJS.ErrnoException).code ?? "EIO";
      if (problem !== "ENOENT") return { file, problem };
    }
  }
  return undefined;
}
