import { describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { RotatingLog } from "../../src/runtime/log-sink.ts";
import { writePidRecord } from "../../src/runtime/pid-file.ts";
import { writeFileAtomic } from "../../src/store/atomic.ts";
import { Store } from "../../src/store/store.ts";
import { ChatHarness } from "../agent/harness.ts";
import { MemoryIndex } from "../fixtures/store-v01/memory-index.ts";
import { SessionStore } from "../fixtures/store-v01/session-store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Folder names under data_dir are user and session ids, files hold conversations and
// llama-server's log: nothing there is for other local users (issue 10 item 9). Windows
// ignores these mode bits, so the assertions are POSIX-only.
const posix = process.platform !== "win32";
/** The permission bits in octal, e.g. "700", so a failure reads plainly. */
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);

/** Every folder and file under `root` whose mode is not owner-only, as "path mode". */
function exposed(root: string): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      const m = mode(path);
      if (e.isDirectory()) {
        if (m !== "700") out.push(`${relative(root, path)}/ ${m}`);
        walk(path);
      } else if (m !== "600") out.push(`${relative(root, path)} ${m}`);
    }
  };
  walk(root);
  return out;
}

describe.skipIf(!posix)("what the core writes under data_dir is owner-only", () => {
  test("after a chat: data_dir 0700, the database and its WAL 0600", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
    h.llama.script({ content: ["hello"] });
    const { terminal } = await h.chat("c1", { input: "hi", session_id: "s1" });
    expect(terminal.type).toBe("result");
    expect(mode(h.dataDir)).toBe("700");
    expect(exposed(h.dataDir)).toEqual([]);
    expect(statSync(join(h.dataDir, "local-ai.db")).isFile()).toBe(true);
    expect(statSync(join(h.dataDir, "local-ai.db-wal")).isFile()).toBe(true);
  });

  test("folders an older version made 0755 (and a 0644 log) are tightened, imported ones too; the data_dir itself is not", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    for (const d of ["users/u/sessions/s", "users/u/memory", "logs", "run"]) {
      mkdirSync(join(data, d), { recursive: true, mode: 0o755 });
    }
    for (const d of [
      "",
      "users",
      "users/u",
      "users/u/sessions",
      "users/u/sessions/s",
      "users/u/memory",
      "logs",
      "run",
    ]) {
      chmodSync(join(data, d), 0o755);
    }
    writeFileSync(join(data, "logs", "llama-server.log"), "old line\n", { mode: 0o644 });
    chmodSync(join(data, "logs", "llama-server.log"), 0o644);

    // The 0.1 store wrote these; the database imports them and keeps the folder aside.
    new SessionStore(data, "u", "s").saveHistory([{ role: "user", content: "hi" }]);
    MemoryIndex.forUser(data, "u").load().addTurn({ id: "t", session_id: "s", text: "x", at: "now" });
    for (const d of ["users", "users/u", "users/u/sessions", "users/u/sessions/s"])
      chmodSync(join(data, d), 0o755);
    const store = Store.open(data);
    await store.whenImported();
    store.close();
    const log = new RotatingLog(join(data, "logs"), 1024, 2);
    log.write("new line\n");
    log.close();
    writePidRecord(data, { pid: process.pid, port: 1, binary: process.execPath, argv: [] });

    expect(exposed(data)).toEqual([]);
    // A data_dir the user chose (here: one that existed) keeps the mode they gave it.
    expect(mode(data)).toBe("755");
  });

  test("a database file found with group or other bits (copied back from a backup) is tightened, its WAL too", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const first = Store.open(data);
    first.close();
    for (const f of ["local-ai.db", "local-ai.db-wal", "local-ai.db-shm"]) {
      writeFileSync(join(data, f), "", { flag: "a" });
      chmodSync(join(data, f), 0o644);
    }
    const store = Store.open(data);
    try {
      expect(exposed(data)).toEqual([]);
    } finally {
      store.close();
    }
  });

  test("a database set aside with group or other bits (an older version's, a backup's) is tightened, its WAL too", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const first = Store.open(data);
    first.close();
    // Every user's conversations as they were when it was set aside; users.delete scrubs it.
    const copy = join(data, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    copyFileSync(join(data, "local-ai.db"), copy);
    writeFileSync(`${copy}-wal`, "");
    for (const f of [copy, `${copy}-wal`]) chmodSync(f, 0o644);
    const store = Store.open(data);
    try {
      expect(exposed(data)).toEqual([]);
    } finally {
      store.close();
    }
  });

  test("log rotation keeps the current and rotated files 0600", async () => {
    await using dir = tmpdir();
    const logs = join(dir.path, "logs");
    const log = new RotatingLog(logs, 100, 3);
    for (let i = 0; i < 20; i++) log.write(`${String(i).padStart(2, "0")} ${"x".repeat(30)}\n`);
    log.close();
    expect(mode(logs)).toBe("700");
    expect(readdirSync(logs).filter((n) => n.startsWith("llama-server"))).toHaveLength(3);
    expect(exposed(logs)).toEqual([]);
  });

  test("an atomic write creates missing folders 0700 and the file 0600, replacing a 0644 one", async () => {
    await using dir = tmpdir();
    const target = join(dir.path, "a", "b", "f.json");
    mkdirSync(join(dir.path, "a", "b"), { recursive: true });
    writeFileSync(target, "old", { mode: 0o644 });
    chmodSync(target, 0o644);
    writeFileAtomic(target, "new");
    expect(mode(target)).toBe("600");
    const fresh = join(dir.path, "c", "d", "f.json");
    writeFileAtomic(fresh, "new");
    expect(mode(join(dir.path, "c"))).toBe("700");
    expect(mode(join(dir.path, "c", "d"))).toBe("700");
    expect(mode(fresh)).toBe("600");
  });
});
