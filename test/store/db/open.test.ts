import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { SCHEMA_VERSION } from "../../../src/store/db/migrations.ts";
import { DB_FILE, damagedMarker, markDamaged, openStore } from "../../../src/store/db/open.ts";
import { APPLICATION_ID } from "../../../src/store/db/ownership.ts";
import { Store } from "../../../src/store/store.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const modeOf = (p: string) => statSync(p).mode & 0o777;

describe("the database file", () => {
  test("is made owner-only with its WAL, at the current schema, with FTS5 here", () => {
    using dir = tmpdir();
    const opened = openStore(join(dir.path, "data"));
    opened.db.run("INSERT INTO meta (key, value) VALUES ('x', 'y')");
    const path = join(dir.path, "data", DB_FILE);
    expect(opened.path).toBe(path);
    expect(opened.fts).toBe(true);
    expect((opened.db.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(
      SCHEMA_VERSION,
    );
    expect((opened.db.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode).toBe(
      "wal",
    );
    expect((opened.db.query("PRAGMA secure_delete").get() as { secure_delete: number }).secure_delete).toBe(
      1,
    );
    if (process.platform !== "win32") {
      expect(modeOf(join(dir.path, "data"))).toBe(0o700);
      for (const f of readdirSync(join(dir.path, "data")))
        expect(modeOf(join(dir.path, "data", f))).toBe(0o600);
      expect(existsSync(`${path}-wal`)).toBe(true);
    }
    opened.db.close();
  });

  test("a second open migrates nothing and keeps what is there", () => {
    using dir = tmpdir();
    const a = openStore(dir.path);
    a.db.run("INSERT INTO meta (key, value) VALUES ('kept', '1')");
    a.db.close();
    const b = openStore(dir.path);
    expect(b.db.query("SELECT value FROM meta WHERE key = 'kept'").get()).toEqual({ value: "1" });
    expect(b.resetFrom).toBeUndefined();
    b.db.close();
  });

  test("random bytes over the header: moved aside with its WAL, a fresh database, the reset remembered", () => {
    using dir = tmpdir();
    const s = Store.open(dir.path);
    s.close();
    const path = join(dir.path, DB_FILE);
    const junk = Buffer.alloc(4096);
    for (let i = 0; i < junk.length; i++) junk[i] = (i * 7919 + 13) % 251;
    writeFileSync(path, junk);
    const t = new Date("2026-12-01T10:00:00.000Z");
    const reopened = Store.open(dir.path, { now: () => t });
    const reset = reopened.takeResets().at(-1);
    expect(reset?.aside).toBe(`${path}.corrupt-2026-12-01T10-00-00-000Z`);
    expect(reset?.problem).toMatch(/not a database|malformed|corrupt/i);
    expect(reopened.takeResets().at(-1)).toBeUndefined(); // handed out once
    expect(existsSync(reset?.aside as string)).toBe(true);
    expect(reopened.list("u", 10).sessions).toEqual([]);
    reopened.close();
    // doctor reads it from the fresh file
    const db = new Database(path);
    expect(db.query("SELECT value FROM meta WHERE key = 'reset_from'").get()).toEqual({
      value: reset?.aside,
    });
    db.close();
  });

  test("damage past the header: a small file fails quick_check at open, a marked one is reset at the next open", () => {
    using dir = tmpdir();
    const s = Store.open(dir.path);
    for (let i = 0; i < 300; i++)
      s.conversations.commitTurn({
        userId: "u",
        sessionId: `s${i}`,
        agent: "a",
        messages: [{ role: "user", content: `hello ${i} ${"pad ".repeat(50)}` }],
        at: new Date(),
      });
    s.close();
    const path = join(dir.path, DB_FILE);
    const bytes = readFileSync(path);
    expect(bytes.length).toBeGreaterThan(20 * 4096);
    bytes.fill(0xa5, 10 * 4096, 12 * 4096); // two pages in the middle
    writeFileSync(path, bytes);
    const reopened = Store.open(dir.path);
    expect(reopened.takeResets().at(-1)?.problem).toMatch(/quick_check|malformed|corrupt/i);
    reopened.close();

    markDamaged(path, "database disk image is malformed");
    const again = Store.open(dir.path);
    expect(again.takeResets().at(-1)?.problem).toContain("a statement met damage in it");
    expect(existsSync(damagedMarker(path))).toBe(false);
    again.close();
  });

  test("a database from a newer local-ai is refused, not moved aside or migrated down", () => {
    using dir = tmpdir();
    const db = new Database(join(dir.path, DB_FILE), { create: true });
    db.run(`PRAGMA user_version = ${SCHEMA_VERSION + 5}`);
    db.close();
    expect(() => openStore(dir.path)).toThrow(/newer local-ai/);
    expect(readdirSync(dir.path)).toEqual([DB_FILE]);
  });

  test("without FTS5 the schema is made without its indexes, and they are built once FTS5 is there", async () => {
    using dir = tmpdir();
    const plain = Store.open(dir.path, { withoutFts: true });
    expect(plain.fts).toBe(false);
    plain.conversations.commitTurn({
      userId: "u",
      sessionId: "s",
      agent: "a",
      messages: [
        { role: "user", content: "where is the lighthouse" },
        { role: "assistant", content: "on the cliff" },
      ],
      memoryText: "where is the lighthouse\non the cliff",
      at: new Date(),
    });
    expect((await plain.search("u", "lighthouse", 5)).map((h) => h.seq)).toEqual([0]);
    plain.close();
    const full = Store.open(dir.path);
    expect(full.fts).toBe(true);
    expect((await full.search("u", "lighthouse", 5)).map((h) => h.seq)).toEqual([0]);
    expect(full.memory.search("u", "lighthouse", 3).map((h) => h.doc.source)).toEqual(["session:s"]);
    full.close();
  });
});

/** Another program's SQLite file: schema version 0, a table of its own, rollback journal. */
function foreignDatabase(path: string): void {
  const db = new Database(path, { create: true });
  db.run("CREATE TABLE notes (body TEXT)");
  db.run("INSERT INTO notes VALUES ('theirs')");
  db.close();
}

function tablesOf(path: string): { tables: string[]; journal: string } {
  const db = readDb(path);
  const tables = (
    db.query("SELECT name FROM sqlite_schema WHERE type = 'table'").all() as { name: string }[]
  ).map((r) => r.name);
  const journal = (db.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode;
  db.close();
  return { tables, journal };
}

describe.skipIf(process.platform === "win32")("a database that is not ours", () => {
  test("local-ai.db as a link (to an empty file, to another program's database) is refused, the target untouched", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(data);
    const empty = join(dir.path, "empty");
    writeFileSync(empty, "");
    symlinkSync(empty, join(data, DB_FILE));
    expect(() => openStore(data)).toThrow(
      expect.objectContaining({
        code: "internal_error",
        data: expect.objectContaining({ problem: "ELOOP" }),
      }),
    );
    expect(statSync(empty).size).toBe(0);

    using other = tmpdir();
    const theirs = join(other.path, "app.sqlite");
    foreignDatabase(theirs);
    const link = join(other.path, "data");
    mkdirSync(link);
    symlinkSync(theirs, join(link, DB_FILE));
    expect(() => openStore(link)).toThrow(expect.objectContaining({ code: "internal_error" }));
    expect(tablesOf(theirs)).toEqual({ tables: ["notes"], journal: "delete" });
  });

  test("another program's database in data_dir is refused, not migrated and not moved aside", () => {
    using dir = tmpdir();
    const path = join(dir.path, DB_FILE);
    foreignDatabase(path);
    expect(() => openStore(dir.path)).toThrow(
      expect.objectContaining({
        code: "internal_error",
        data: expect.objectContaining({ problem: "not_ours" }),
      }),
    );
    expect(tablesOf(path)).toEqual({ tables: ["notes"], journal: "delete" });
    expect(readdirSync(dir.path)).toEqual([DB_FILE]);
  });

  test("a database an earlier local-ai wrote (no application_id) still opens, and is marked ours", () => {
    using dir = tmpdir();
    const first = openStore(dir.path);
    first.db.run("INSERT INTO meta (key, value) VALUES ('kept', 'yes')");
    first.db.run("PRAGMA application_id = 0");
    first.db.close();
    const again = openStore(dir.path);
    expect(again.resetFrom).toBeUndefined();
    expect(again.db.query("SELECT value FROM meta WHERE key = 'kept'").get()).toEqual({ value: "yes" });
    expect(again.db.query("PRAGMA application_id").get()).toEqual({ application_id: APPLICATION_ID });
    again.db.close();
  });

  test("data_dir itself may be a link: the database is made in its target", () => {
    using dir = tmpdir();
    const real = join(dir.path, "real");
    mkdirSync(real);
    symlinkSync(real, join(dir.path, "data"));
    openStore(join(dir.path, "data")).db.close();
    expect(statSync(join(real, DB_FILE)).mode & 0o777).toBe(0o600);
  });
});

describe("two cores at a database's first open", () => {
  test("the second waits out the first's lock (its creation, its migration) instead of failing", async () => {
    using dir = tmpdir();
    const path = join(dir.path, DB_FILE);
    // Another process holds the fresh file's write lock for a moment, as a core migrating it does.
    const holder = Bun.spawn(
      [
        process.execPath,
        "-e",
        `const { Database } = require("bun:sqlite");
         const db = new Database(${JSON.stringify(path)}, { create: true });
         db.run("BEGIN EXCLUSIVE");
         db.run("CREATE TABLE held (x)");
         console.log("locked");
         setTimeout(() => { db.run("ROLLBACK"); db.close(); }, 400);`,
      ],
      { stdout: "pipe", stderr: "inherit" },
    );
    const reader = holder.stdout.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toContain("locked");
    const t0 = Date.now();
    const opened = openStore(dir.path);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
    expect((opened.db.query("PRAGMA user_version").get() as { user_version: number }).user_version).toBe(
      SCHEMA_VERSION,
    );
    opened.db.close();
    await holder.exited;
  });
});

describe("migration 7: the core's requests to write again", () => {
  const REPLY =
    "Your reply could not be read: it does not follow this chat's format for answers and tool calls. Write it again, as plain text or as a tool call in the format you were given.";
  const CALL = `Your tool call could not be used: unknown tool 'x'. Write it again as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> with valid JSON, or answer without tools.`;

  test("those an earlier version stored are marked the core's; a user's own of the same text is not", () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const db = new Database(join(dir.path, DB_FILE));
    // The database as migration 6 left it, with the rows an earlier core wrote.
    db.run("ALTER TABLE messages DROP COLUMN by_core");
    const session = db.query(
      "INSERT INTO sessions (user_id, session_id, title, agent, created_at, updated_at, message_count, preview) VALUES ('u', ?, 'q', 'a', 1, 1, ?, ?)",
    );
    const message = db.query(
      "INSERT INTO messages (user_id, session_id, seq, role, content, created_at) VALUES ('u', ?, ?, ?, ?, ?)",
    );
    const rows: Record<string, [string, string, number][]> = {
      // One turn that wrote again twice and stopped with no text: its preview was the request.
      again: [
        ["user", "q", 1],
        ["assistant", "<tool_call>x", 1],
        ["user", REPLY, 1],
        ["assistant", "bad call", 1],
        ["user", CALL, 1],
        ["assistant", "", 1],
      ],
      // The user typed them, opening turns of their own (another commit, another time).
      typed: [
        ["user", REPLY, 1],
        ["assistant", "a", 1],
        ["user", CALL, 2],
        ["assistant", "b", 2],
      ],
    };
    for (const [id, list] of Object.entries(rows)) {
      session.run(
        id,
        list.length,
        id === "again" ? "Your tool call could not be used: unknown tool 'x'…" : "b",
      );
      for (const [seq, [role, content, at]] of list.entries()) message.run(id, seq, role, content, at);
    }
    db.run("PRAGMA user_version = 6");
    db.close();
    const store = Store.open(dir.path);
    const marked = (id: string) =>
      store.conversations.history("u", id).flatMap((m, seq) => ("by_core" in m ? [seq] : []));
    expect(marked("again")).toEqual([2, 4]);
    expect(marked("typed")).toEqual([]);
    expect(store.conversations.session("u", "again")).toMatchObject({
      message_count: 4,
      preview: "bad call",
    });
    expect(store.conversations.session("u", "typed")).toMatchObject({ message_count: 4, preview: "b" });
    store.close();
  });
});

// The damage note was read with readFileSync at open: a FIFO at its name blocked the core's open
// (and with it every conversation method, a chat's commit and the stop) until a writer came,
// forever; a link to /dev/zero never ended. In a child, with a limit, so a blocked open fails
// the test rather than hanging it.
describe.skipIf(process.platform === "win32")("a damage note that is not a regular file", () => {
  test("a FIFO or a device still marks the database damaged, never read", () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const note = damagedMarker(join(dir.path, DB_FILE));
    for (const make of [() => Bun.spawnSync(["mkfifo", note]), () => symlinkSync("/dev/zero", note)]) {
      make();
      const script = `import { Store } from ${JSON.stringify(join(import.meta.dir, "../../../src/store/store.ts"))};
const store = Store.open(${JSON.stringify(dir.path)});
console.log(JSON.stringify(store.takeResets().at(-1)?.problem ?? null));
store.close();`;
      const run = Bun.spawnSync([process.execPath, "-e", script], { timeout: 20_000, stderr: "pipe" });
      expect(run.exitCode).toBe(0);
      expect(JSON.parse(run.stdout.toString())).toContain(
        "a statement met damage in it (its note cannot be read:",
      );
      expect(lstatSync(note, { throwIfNoEntry: false })).toBeUndefined();
    }
  });
});

// The core writes its damage note only as a regular file, so a folder at that name is none: it
// had every open set the healthy database aside and then fail on removing the folder (rmSync
// without recursive), the log and its index left at the live name, again at each open.
describe("a folder at the damage note's name", () => {
  test("is no note: the database opens as it is, the folder left alone", () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const note = damagedMarker(join(dir.path, DB_FILE));
    mkdirSync(note);
    writeFileSync(join(note, "kept.txt"), "the user's own file");
    for (let i = 0; i < 2; i++) {
      const store = Store.open(dir.path);
      const reset = store.takeResets().at(-1);
      store.close();
      expect(reset).toBeUndefined();
    }
    expect(readdirSync(dir.path).filter((n) => n.includes(".corrupt-"))).toEqual([]);
    expect(readFileSync(join(note, "kept.txt"), "utf8")).toBe("the user's own file");
  });
});
