import { expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type PidRecord, pidFilePath, reapLeftover, writePidRecord } from "../../src/runtime/pid-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A leftover's record names a `binary` on a network share that is now offline (the config since
// pointed elsewhere): the reap's realpath of it blocked the main loop for minutes, or for good on
// a hard mount, and the core's start with it. Its drive is asked first, off the loop.
const DEAD = "/mnt/offline/llama-server";
const CONFIGURED = "/opt/llama/llama-server";

async function deadShareRecord(data: string, leaderPid: number) {
  const owner = Bun.spawn(["true"]);
  await owner.exited;
  writePidRecord(data, { pid: process.pid, port: 0, binary: DEAD, argv: [], group: true });
  const file = pidFilePath(data);
  const record = JSON.parse(readFileSync(file, "utf8")) as PidRecord;
  const members = [{ pid: leaderPid + 1, start_time: "77" }];
  writeFileSync(
    file,
    JSON.stringify({ ...record, pid: leaderPid, members, owner: { pid: owner.pid, start_time: null } }),
  );
  return { file, record };
}

test("a live leftover whose program's drive does not answer: left alone, nothing resolved on the loop", async () => {
  await using dir = tmpdir();
  const data = join(dir.path, "data");
  const { file, record } = await deadShareRecord(data, 4_190_001);
  const asked: string[] = [];
  const signals: unknown[] = [];
  const outcomes = await reapLeftover(data, {
    configured: { "llama-server": [CONFIGURED] },
    alive: (pid) => pid === 4_190_001,
    identity: () => ({ start_time: record.start_time, cmdline: DEAD, argv: [DEAD], exe: DEAD }),
    kill: (...args) => void signals.push(args),
    driveAnswers: async (path) => {
      asked.push(path);
      return path !== DEAD;
    },
  });
  expect(outcomes).toHaveLength(1);
  expect(outcomes[0]).toMatchObject({ action: "unexplained", pid: 4_190_001 });
  expect((outcomes[0] as { reason: string }).reason).toContain("does not answer");
  expect(asked).toContain(DEAD);
  expect(signals).toEqual([]);
  expect(existsSync(file)).toBe(true);
});

test("a gone leader's members, its program's drive not answering: none signalled, the record kept", async () => {
  await using dir = tmpdir();
  const data = join(dir.path, "data");
  const { file } = await deadShareRecord(data, 4_190_011);
  const signals: unknown[] = [];
  const outcomes = await reapLeftover(data, {
    configured: { "llama-server": [CONFIGURED] },
    alive: (pid) => pid === 4_190_012,
    identity: () => ({ start_time: "77", cmdline: DEAD }),
    groupOf: () => 4_190_011,
    kill: (...args) => void signals.push(args),
    driveAnswers: async (path) => path !== DEAD,
  });
  expect(outcomes[0]).toMatchObject({ action: "unexplained", pid: 4_190_011 });
  expect((outcomes[0] as { reason: string }).reason).toContain("does not answer");
  expect(signals).toEqual([]);
  expect(existsSync(file)).toBe(true);
});

// The record's program and the configured one answer, but the live process shows a path on a
// share now offline (its executable, or the script its interpreter runs): judging it resolved that
// path on the loop, the same hang. Its drive is asked first too; a path that does not answer
// shows nothing, and the recorded arguments can still tell.
const SHOWN = "/mnt/offline/bin/llama-server";

async function shownOnDeadShare(args: string[]) {
  const dir = tmpdir();
  const data = join(dir.path, "data");
  writePidRecord(data, { pid: process.pid, port: 0, binary: CONFIGURED, argv: ["--port", "1"] });
  const file = pidFilePath(data);
  const record = JSON.parse(readFileSync(file, "utf8")) as PidRecord;
  const owner = Bun.spawn(["true"]);
  await owner.exited;
  writeFileSync(
    file,
    JSON.stringify({ ...record, pid: 4_190_021, owner: { pid: owner.pid, start_time: null } }),
  );
  const asked: string[] = [];
  const signals: unknown[] = [];
  const outcomes = await reapLeftover(data, {
    configured: { "llama-server": [CONFIGURED] },
    alive: (pid) => pid === 4_190_021 && signals.length === 0,
    identity: () => ({
      start_time: record.start_time,
      cmdline: [SHOWN, ...args].join(" "),
      argv: [SHOWN, ...args],
      exe: SHOWN,
    }),
    kill: (...args) => void signals.push(args),
    driveAnswers: async (path) => {
      asked.push(path);
      return !path.startsWith("/mnt/offline/");
    },
    graceMs: 0,
  });
  return { dir, file, outcomes, asked, signals };
}

test("a live leftover showing a path whose drive does not answer: asked first, left alone", async () => {
  const { dir, file, outcomes, asked, signals } = await shownOnDeadShare(["--other"]);
  await using _ = dir;
  expect(asked).toContain(SHOWN);
  expect(outcomes[0]).toMatchObject({ action: "unexplained", pid: 4_190_021 });
  expect((outcomes[0] as { reason: string }).reason).toContain("does not answer");
  expect(signals).toEqual([]);
  expect(existsSync(file)).toBe(true);
});

test("one showing such a path but launched with the recorded arguments is still ours", async () => {
  const { dir, outcomes, signals } = await shownOnDeadShare(["--port", "1"]);
  await using _ = dir;
  expect(outcomes[0]).toMatchObject({ action: "stopped", pid: 4_190_021 });
  expect(signals).toEqual([[4_190_021, "SIGTERM"]]);
});
