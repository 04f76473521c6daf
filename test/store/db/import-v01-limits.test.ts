import { expect, spyOn, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CheckpointSchema } from "../../../src/store/checkpoint.ts";
import { openStore } from "../../../src/store/db/open.ts";
import * as v01 from "../../../src/store/import-v01.ts";
import { HistorySchema, importUnit } from "../../../src/store/import-v01.ts";
import { eraseImportedTail } from "../../../src/store/import-v01-erase.ts";
import { Store } from "../../../src/store/store.ts";
import { logger } from "../../../src/util/logger.ts";
import { holdImportBefore } from "../../fixtures/store-v01/hold-import.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/**
 * What a 0.1 file costs to import, bounded (docs/agent.md, "Import of the 0.1 layout"): read
 * whole and parsed in the core's own process at every start until it is imported, a file that
 * took gigabytes had the core killed at each start, a loop the host could not get out of.
 */

test("a 0.1 history of many bad messages gives one issue, not one per message", () => {
  // z.array kept an issue (~400 bytes) per element: 10 MiB of `1,` took 2 GB, 256 MiB far more.
  const bad = Array.from({ length: 1000 }, () => 1);
  const history = HistorySchema.safeParse({ version: 1, messages: bad });
  expect(history.success).toBe(false);
  expect(history.error?.issues).toHaveLength(1);
  expect(history.error?.issues[0]?.path).toEqual(["messages", 0]);
  const cp = CheckpointSchema.safeParse({
    version: 1,
    trace_id: "t",
    user_input: "hi",
    agent: "a",
    step: 0,
    parse_errors: 0,
    best_text: "",
    turn: [{ role: "user", content: "hi" }, ...bad],
    updated_at: "2026-01-01T00:00:00Z",
  });
  expect(cp.error?.issues).toHaveLength(1);
  // Where it is, as a resume's warning says (agent/turn/session.ts).
  expect(cp.error?.issues[0]?.path).toEqual(["turn", 1]);
});

test("good messages still parse, each as its schema leaves it", () => {
  const messages = [
    { role: "user", content: "hi", extra: "dropped" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
    },
    { role: "tool", tool_call_id: "c", content: "ok" },
  ];
  expect(HistorySchema.parse({ version: 1, messages }).messages).toEqual([
    { role: "user", content: "hi" },
    messages[1] as never,
    messages[2] as never,
  ]);
});

/** ann's session `big` whose history.json holds `bytes` of JSON (padded), its database open. */
function bigSession(bytes: number) {
  const dir = tmpdir();
  const session = join(dir.path, "users", "ann", "sessions", "big");
  mkdirSync(session, { recursive: true });
  const json = JSON.stringify({ version: 1, messages: [{ role: "user", content: "the words" }] });
  writeFileSync(join(session, "history.json"), json.padEnd(bytes, " "));
  const opened = openStore(dir.path);
  return {
    dir,
    db: opened.db,
    history: join(session, "history.json"),
    [Symbol.dispose]() {
      opened.db.close();
      dir[Symbol.dispose]();
    },
  };
}

test("a 0.1 file past the cap is not imported, kept as it was, named with why, and not read again", () => {
  using s = bigSession(4096);
  const unit = { unit: { user: "ann", session: "big" }, mark: 0, at: 0, maxBytes: 1024 };
  const report = importUnit(s.db, s.dir.path, unit);
  expect(report).not.toBe("done");
  expect(report === "done" ? [] : report.skipped).toEqual([
    "users/ann/sessions/big/history.json (over 1024 bytes)",
  ]);
  expect(s.db.query("SELECT COUNT(*) AS n FROM messages").get()).toEqual({ n: 0 });
  expect(existsSync(s.history)).toBe(true);
  expect(statSync(s.history).size).toBe(4096);
  // The unit is recorded: the next start (the import resumed) neither reads it again nor reports it twice.
  expect(s.db.query("SELECT key FROM meta WHERE key = 'import_v01:ann/big'").get()).not.toBeNull();
  expect(importUnit(s.db, s.dir.path, unit)).toEqual(v01.emptyReport());
});

test("a 0.1 file within the cap is imported", () => {
  using s = bigSession(1024);
  const report = importUnit(s.db, s.dir.path, {
    unit: { user: "ann", session: "big" },
    mark: 0,
    at: 0,
    maxBytes: 1024,
  });
  expect(report === "done" ? -1 : report.sessions).toBe(1);
  expect(s.db.query("SELECT COUNT(*) AS n FROM messages").get()).toEqual({ n: 1 });
});

test("the cap a 0.1 file is read to keeps a hostile file's parse well under the core's memory", () => {
  // Measured: JSON.parse of 64 MiB of `{},` peaks near 1.9 GB; realistic small messages cost ~14x their bytes.
  expect(v01.MAX_V01_FILE_BYTES).toBeLessThanOrEqual(32 * 2 ** 20);
});

/** ann's sessions `big`, its history.json past the cap, and `small`, in a new folder. */
function pastTheCap() {
  const dir = tmpdir();
  const sessions = join(dir.path, "users", "ann", "sessions");
  mkdirSync(join(sessions, "big"), { recursive: true });
  // Sparse: past the cap, its size is all that is read (no 32 MiB written here).
  const big = join(sessions, "big", "history.json");
  writeFileSync(big, "");
  truncateSync(big, v01.MAX_V01_FILE_BYTES + 1);
  mkdirSync(join(sessions, "small"));
  writeFileSync(
    join(sessions, "small", "history.json"),
    JSON.stringify({ version: 1, messages: [{ role: "user", content: "hi" }] }),
  );
  return dir;
}

test("a start with a 0.1 file past the cap warns of it, imports the rest, and keeps it whole", async () => {
  using dir = pastTheCap();
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    const store = Store.open(dir.path);
    await store.whenImported();
    expect(store.list("ann", 10).sessions.map((s) => s.session_id)).toEqual(["small"]);
    store.close();
  } finally {
    warn.mockRestore();
  }
  expect(lines.filter((l) => l.includes("0.1"))).toEqual([
    `0.1 files not imported, kept as they were (in imported-0.1/ once all is imported): users/ann/sessions/big/history.json (over ${v01.MAX_V01_FILE_BYTES} bytes)`,
  ]);
  expect(
    statSync(join(dir.path, "imported-0.1", "users", "ann", "sessions", "big", "history.json")).size,
  ).toBe(v01.MAX_V01_FILE_BYTES + 1);
});

test("a file the import skipped is warned of at once, not only when the import finishes", async () => {
  using dir = pastTheCap();
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  // Stopped before its last unit (a host that quit): `big`'s unit is recorded, and the next start,
  // which goes on from there, never reads it again. Warned of only at the end, it never was.
  const held = holdImportBefore("ann/small");
  try {
    const store = Store.open(dir.path, { beforeImportUnit: held.hook });
    await held.reached;
    store.close();
    held.release();
    await store.whenImported();
    const again = Store.open(dir.path);
    await again.whenImported();
    again.close();
  } finally {
    warn.mockRestore();
  }
  expect(lines.filter((l) => l.includes("history.json"))).toEqual([
    `0.1 files not imported, kept as they were (in imported-0.1/ once all is imported): users/ann/sessions/big/history.json (over ${v01.MAX_V01_FILE_BYTES} bytes)`,
  ]);
});

// An older version imported 0.1 files up to 256 MiB: the copy it kept of one past today's cap
// holds turns the database has, and an edit of them must still cut it (edited-away text counts
// as erased, docs/agent.md). Read to the import's new cap, it was left whole, the secret in it.
test("an edit cuts a kept 0.1 history an older version imported, past today's cap", () => {
  using dir = tmpdir();
  const session = join(dir.path, v01.IMPORTED_DIR, "users", "ann", "sessions", "s");
  mkdirSync(session, { recursive: true });
  const history = join(session, "history.json");
  const messages = [
    { role: "user", content: "plan a trip" },
    { role: "assistant", content: "Porto" },
    { role: "user", content: "my card is SECRET-4111" },
    { role: "assistant", content: "noted" },
  ];
  writeFileSync(history, JSON.stringify({ version: 1, messages }).padEnd(v01.MAX_V01_FILE_BYTES + 1, " "));
  const held = (_m: unknown, upTo: number) => upTo;
  eraseImportedTail(dir.path, "ann", "s", { seq: 2, base: 0, held }, false);
  expect(JSON.parse(readFileSync(history, "utf8")).messages).toEqual(messages.slice(0, 2));
});

test("an edit leaves whole a kept 0.1 history past the cap that the import skipped", () => {
  using dir = tmpdir();
  const session = join(dir.path, v01.IMPORTED_DIR, "users", "ann", "sessions", "s");
  mkdirSync(session, { recursive: true });
  const history = join(session, "history.json");
  const json = JSON.stringify({ version: 1, messages: [{ role: "user", content: "only here" }] });
  writeFileSync(history, json.padEnd(v01.MAX_V01_FILE_BYTES + 1, " "));
  // The database holds none of it: the session's turns are 1.0's (or its checkpoint's), edited from seq 0.
  eraseImportedTail(dir.path, "ann", "s", { seq: 0, base: 0, held: () => 0 }, false);
  expect(readFileSync(history, "utf8").trimEnd()).toBe(json);
});
