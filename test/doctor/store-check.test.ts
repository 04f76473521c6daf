import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { storeCheck } from "../../src/doctor/store-check.ts";
import { DAMAGE_NOTE_BYTES, DB_FILE, markDamaged } from "../../src/store/db/open.ts";
import { Store } from "../../src/store/store.ts";
import { makeImmutable, undoImmutable } from "../fixtures/full-disk.ts";
import { readDb } from "../fixtures/read-db.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

// Here, not only in the test's finally: a test that timed out never reaches its finally.
afterEach(undoImmutable);

describe("doctor: the conversation database", () => {
  test("none yet: ok, and nothing is created", async () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    const c = await storeCheck(configAt(data));
    expect(c).toMatchObject({ id: "store", status: "ok", data: { fts5: true } });
    expect(existsSync(data)).toBe(false);
  });

  // A core killed during its first open (SIGKILL, a power cut) leaves local-ai.db with WAL set in
  // its header and no table yet, or empty; the next start makes the schema as for a new file.
  // doctor said "fail: cannot be read: no such table: meta" and told the user to move it aside
  // (seen killing the compiled core at random moments).
  test("begun by a core killed in its first open: ok, not a failure; the next start makes it", async () => {
    using dir = tmpdir();
    const path = join(dir.path, DB_FILE);
    const begun = new Database(path, { create: true });
    begun.run("PRAGMA journal_mode = WAL");
    begun.close();
    for (const left of ["its header alone", "an empty file"]) {
      if (left === "an empty file") writeFileSync(path, "");
      const c = await storeCheck(configAt(dir.path));
      expect([left, c.status]).toEqual([left, "ok"]);
      expect(c.message).toContain("not made yet");
    }
    Store.open(dir.path).close();
    expect((await storeCheck(configAt(dir.path))).message).toContain("is healthy");
  });

  test("healthy, then reset after random bytes over its header, then marked damaged", async () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    expect(await storeCheck(configAt(dir.path))).toMatchObject({ status: "ok" });
    const path = join(dir.path, DB_FILE);
    writeFileSync(path, Buffer.alloc(8192, 0x5a));
    Store.open(dir.path).close(); // the core's next start sets it aside
    const reset = await storeCheck(configAt(dir.path));
    expect(reset.status).toBe("warn");
    expect(reset.message).toContain("local-ai.db.corrupt-");
    expect(readFileSync(reset.data?.reset_from as string).subarray(0, 4)).toEqual(Buffer.alloc(4, 0x5a));
    markDamaged(path, "database disk image is malformed");
    expect(await storeCheck(configAt(dir.path))).toMatchObject({
      status: "warn",
      message: expect.stringContaining("met damage"),
    });
  });

  // doctor never throws: a damage note it cannot read (another user's core wrote it 0600, or
  // something else took its name) made the whole doctor end in a stack trace and no report.
  test("a damage note that cannot be read still reports the damage, never throws", async () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const note = `${join(dir.path, DB_FILE)}.damaged`;
    // Past the note's read cap (it holds one SQLite message): not read, still the damage.
    writeFileSync(note, "x".repeat(DAMAGE_NOTE_BYTES + 1));
    const c = await storeCheck(configAt(dir.path));
    expect([c.id, c.status]).toEqual(["store", "warn"]);
    expect(c.message).toContain("met damage (its note cannot be read:");
    expect(c.message).toContain(`over the limit of ${DAMAGE_NOTE_BYTES} bytes`);
    // A folder at its name is no note (the core's open leaves it, and the database, as they are).
    rmSync(note);
    mkdirSync(note);
    expect((await storeCheck(configAt(dir.path))).message).not.toContain("met damage");
  });

  test("damage inside the file fails the check; without FTS5 it warns", async () => {
    using dir = tmpdir();
    const s = Store.open(dir.path);
    for (let i = 0; i < 200; i++)
      s.conversations.commitTurn({
        userId: "u",
        sessionId: `s${i}`,
        agent: "a",
        messages: [{ role: "user", content: `x ${i} ${"pad ".repeat(60)}` }],
        at: new Date(),
      });
    s.close();
    expect(await storeCheck(configAt(dir.path), false)).toMatchObject({
      status: "warn",
      message: expect.stringContaining("LIKE"),
    });
    const path = join(dir.path, DB_FILE);
    const bytes = readFileSync(path);
    bytes.fill(0xa5, 8 * 4096, 10 * 4096);
    writeFileSync(path, bytes);
    const c = await storeCheck(configAt(dir.path));
    expect(c.status).toBe("fail");
    expect(c.message).toMatch(/damaged|cannot be read/);
    // Diagnosing changed nothing: the file is where it was, no reset recorded.
    const db = readDb(path);
    db.close();
    expect(existsSync(`${path}.damaged`)).toBe(false);
  });

  // Seen through the compiled core: local-ai.db made read-only (chattr +i, a mode) while it ran;
  // every write failed, and doctor said nothing (the quick_check only reads).
  test.skipIf(process.platform === "win32")(
    "a database file that cannot be written fails the check, naming it",
    async () => {
      using dir = tmpdir();
      Store.open(dir.path).close();
      const path = join(dir.path, DB_FILE);
      // Root writes whatever a file's mode says: an immutable file is read-only even to it.
      const root = process.getuid?.() === 0;
      if (root && !makeImmutable(path)) return;
      if (!root) chmodSync(path, 0o400);
      try {
        const c = await storeCheck(configAt(dir.path));
        expect(c).toMatchObject({ status: "fail", data: { file: path, problem: root ? "EPERM" : "EACCES" } });
        expect(c.message).toContain(`${path} cannot be written`);
      } finally {
        if (root) undoImmutable();
        else chmodSync(path, 0o600);
      }
    },
  );
});

// The core opens local-ai.db only as a regular file of its own (store/db/ownership.ts): a link
// there is refused, and a FIFO fails SQLite's first read. doctor's read-only open followed the
// link and called the target healthy, and waited on the FIFO's open for its whole limit (60 s)
// before saying "run doctor again when the machine is less busy".
describe.skipIf(process.platform === "win32")("doctor: the database path is not a regular file", () => {
  test("a FIFO fails the check at once, naming what it is", async () => {
    using dir = tmpdir();
    const path = join(dir.path, DB_FILE);
    expect(spawnSync("mkfifo", [path]).status).toBe(0);
    // A short limit, so that a check still waiting on the FIFO's open reports (unfinished) soon.
    const c = await storeCheck(configAt(dir.path), true, { limitMs: 1000 });
    expect(c).toMatchObject({ status: "fail", data: { path, problem: "a FIFO" } });
    expect(c.message).toContain("a FIFO");
  });

  test("a link, even to a healthy database, fails as the core refuses it", async () => {
    using dir = tmpdir();
    const real = join(dir.path, "elsewhere");
    Store.open(real).close();
    const data = join(dir.path, "data");
    mkdirSync(data);
    const path = join(data, DB_FILE);
    symlinkSync(join(real, DB_FILE), path);
    const c = await storeCheck(configAt(data));
    expect(c).toMatchObject({ status: "fail", data: { path, problem: "a symbolic link" } });
    // A dangling link too: not "no database yet", since the core's first open refuses it.
    const dangling = join(dir.path, "dangling");
    mkdirSync(dangling);
    symlinkSync(join(dir.path, "nowhere.db"), join(dangling, DB_FILE));
    expect(await storeCheck(configAt(dangling))).toMatchObject({
      status: "fail",
      data: { problem: "a symbolic link" },
    });
  });
});

// The damage note was read with readFileSync: a FIFO at its name blocked doctor's loop (and the
// core's open, test/store/db/open.test.ts) until a writer came, forever; a link to /dev/zero never
// ended. Run in a child, with a limit, so that a check that blocks fails the test, not hangs it.
describe.skipIf(process.platform === "win32")("doctor: a damage note that is not a regular file", () => {
  test("a FIFO or a device is reported as a note that cannot be read, never read", () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const note = `${join(dir.path, DB_FILE)}.damaged`;
    for (const make of [() => spawnSync("mkfifo", [note]), () => symlinkSync("/dev/zero", note)]) {
      make();
      const script = `import { storeCheck } from ${JSON.stringify(join(import.meta.dir, "../../src/doctor/store-check.ts"))};
import { ConfigSchema } from ${JSON.stringify(join(import.meta.dir, "../../src/config/schema.ts"))};
const c = await storeCheck(ConfigSchema.parse({ app: { data_dir: ${JSON.stringify(dir.path)} } }));
console.log(JSON.stringify(c));`;
      const run = Bun.spawnSync([process.execPath, "-e", script], { timeout: 20_000, stderr: "pipe" });
      expect(run.exitCode).toBe(0);
      const c = JSON.parse(run.stdout.toString());
      expect(c.status).toBe("warn");
      expect(c.message).toContain("met damage (its note cannot be read:");
      rmSync(note);
    }
  });
});

// The damage note is the core's own file in data_dir, whose links are never followed: read through
// one planted there (a data_dir others may write), a private file of the user's was quoted whole in
// doctor's report (pasted into bug reports) and in the chat's store_reset warning.
describe.skipIf(process.platform === "win32")("doctor: a damage note planted as a link", () => {
  test("its target is never read into the report", async () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const secret = join(dir.path, "private-key.txt");
    writeFileSync(secret, "SECRETKEYBYTES");
    symlinkSync(secret, `${join(dir.path, DB_FILE)}.damaged`);
    const c = await storeCheck(configAt(dir.path));
    expect(c.message).toContain("met damage (its note cannot be read: a symbolic link)");
    expect(JSON.stringify(c)).not.toContain("SECRETKEYBYTES");
  });
});
