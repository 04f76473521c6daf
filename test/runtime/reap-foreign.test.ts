import { expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type PidRecord, pidFilePath, reapLeftover, writePidRecord } from "../../src/runtime/pid-file.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { pidAlive } from "./helpers/harness.ts";

// A record in run/ that another user wrote (data_dir on a shared folder another user reached
// first, or a core run once with sudo) named a live process of this user's running the configured
// program, its start time read from /proc (world-readable), its owner a dead pid: the reaper
// signalled it, and its whole group. Only this user's own records are acted on.

test.skipIf(process.platform !== "linux")(
  "a record another user owns is never acted on: the process it names keeps running, the record stays",
  async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const program = join(dir.path, "llama-server");
    // Not exec: the shell shows the program as its argv[1] (leftover-verdict.ts).
    writeFileSync(program, "#!/bin/sh\nsleep 60\n", { mode: 0o755 });
    const child = bunSpawner({ path: program, argv: [], env: {} });
    try {
      writePidRecord(data, { pid: child.pid, port: 0, binary: program, argv: [], group: child.group });
      const file = pidFilePath(data);
      const record = JSON.parse(readFileSync(file, "utf8")) as PidRecord;
      const dead = Bun.spawn(["true"]);
      await dead.exited;
      writeFileSync(file, JSON.stringify({ ...record, owner: { pid: dead.pid, start_time: null } }));
      // The core runs as a user other than the record's writer.
      const uid = statSync(file).uid + 1;
      const outcomes = await reapLeftover(data, {
        configured: { "llama-server": [program] },
        graceMs: 200,
        uid,
      });
      expect(outcomes.map((o) => o.action)).toEqual(["foreign"]);
      expect(pidAlive(child.pid)).toBe(true);
      expect(existsSync(file)).toBe(true);
      // Its own user's record is reaped as ever.
      const own = await reapLeftover(data, { configured: { "llama-server": [program] }, graceMs: 200 });
      expect(own.map((o) => o.action)).toEqual(["stopped"]);
    } finally {
      child.kill();
    }
  },
);

// A data_dir on a file system that shows every file as another user's (FAT mounted without uid=,
// docs/supervisor.md), or a core once run with sudo: each record of a core that died stayed
// forever, one warning per record at every start. One whose process is gone names nothing to
// signal and goes; nothing is signalled to find that out.
test("another user's record whose process is gone is removed, nothing signalled", async () => {
  await using dir = tmpdir();
  const data = join(dir.path, "data");
  const { gone, file } = await goneChildRecord(data, (pid) => ({ pid, start_time: null }));
  const outcomes = await reapLeftover(data, {
    configured: { "llama-server": ["/x/llama-server"] },
    uid: statSync(file).uid + 1,
    alive: (pid) => pid !== gone.pid,
  });
  expect(outcomes.map((o) => o.action)).toEqual(["gone"]);
  expect(existsSync(file)).toBe(false);
});

// On a file system that shows every file as another user's, the reap a second model's start
// makes (launcher.ts) met this core's own record and warned it was another user's, at every start.
test("this core's own record, shown as another user's, is its own: no outcome, no warning", async () => {
  await using dir = tmpdir();
  const data = join(dir.path, "data");
  writePidRecord(data, { pid: process.pid, port: 0, binary: "/x/llama-server", argv: [], group: false });
  const file = pidFilePath(data);
  const outcomes = await reapLeftover(data, {
    configured: { "llama-server": ["/x/llama-server"] },
    uid: statSync(file).uid + 1,
  });
  expect(outcomes).toEqual([]);
  expect(existsSync(file)).toBe(true);
});

// The same file system: this core's own record whose llama-server just exited (a crash the
// supervisor is restarting) read as gone and was removed, where on any other file system this
// core's own records are never reaped. The restart rewrites that same file (pidFilePath names it
// by this core's pid) while the reap awaits other records' stops: the new child's record was the
// one removed, and after this core's own crash nothing reaped that llama-server.
test("this core's own record, shown as another user's, is kept while its child is gone too", async () => {
  await using dir = tmpdir();
  const data = join(dir.path, "data");
  // Its owner this core, as the record wrote it.
  const { gone, file } = await goneChildRecord(data);
  const options = {
    configured: { "llama-server": ["/x/llama-server"] },
    alive: (pid: number) => pid !== gone.pid,
  };
  // Where the file shows this user as its owner: not reaped.
  expect(await reapLeftover(data, options)).toEqual([]);
  expect(existsSync(file)).toBe(true);
  expect(await reapLeftover(data, { ...options, uid: statSync(file).uid + 1 })).toEqual([]);
  expect(existsSync(file)).toBe(true);
});

/** A record whose llama-server's pid is one that exited; `owner` replaces the owner it wrote (this core). */
async function goneChildRecord(data: string, owner?: (gone: number) => PidRecord["owner"]) {
  const gone = Bun.spawn(["true"]);
  await gone.exited;
  writePidRecord(data, { pid: process.pid, port: 0, binary: "/x/llama-server", argv: [], group: false });
  const file = pidFilePath(data);
  const record = JSON.parse(readFileSync(file, "utf8")) as PidRecord;
  writeFileSync(file, JSON.stringify({ ...record, pid: gone.pid, owner: owner?.(gone.pid) ?? record.owner }));
  return { gone, file };
}
