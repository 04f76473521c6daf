import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type PidRecord, pidFilePath, reapLeftover, writePidRecord } from "../../src/runtime/pid-file.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { lineWritten } from "../fixtures/wait.ts";
import { ownerWithChild, pidAlive, waitFor } from "./helpers/harness.ts";

const EARLY_OWNER = join(import.meta.dir, "helpers", "early-owner.ts");

/** What a reaping core is configured to run: the stand-in's wrapper script in `dir`. */
const configured = (dir: string) => ({ configured: { "llama-server": [join(dir, "llama-server")] } });

const startTimeOf = (pid: number) =>
  readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[19] as string;

/** A pid no process has now: one that just exited. */
async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

/**
 * Starts a supervisor in a separate process, SIGKILLs that process, returns the orphan's pid.
 * Its llama-server is a build without child mode: one that speaks it exits with its core.
 */
async function orphanIn(dir: string): Promise<{ childPid: number; record: string }> {
  const { owner, childPid } = await ownerWithChild(dir, { ...process.env, FAKE_LLAMA_NO_CHILD_MODE: "1" });
  expect(childPid).toBeGreaterThan(0);
  owner.kill("SIGKILL");
  await owner.exited;
  const runDir = join(dir, "data", "run");
  const name = readdirSync(runDir).find((n) => join(runDir, n) === pidFilePath(join(dir, "data"), owner.pid));
  expect(name).toBeDefined();
  return { childPid, record: join(runDir, name as string) };
}

/**
 * A wrapper that runs its "llama-server" (`sh -c '<inner>exec sleep 60'`) without exec, recorded
 * as a core killed outright left it (its owner gone), then reaped: the outcomes, and whether the
 * inner process was gone after (it is killed either way, so a failing run leaves nothing behind).
 */
async function reapWrapperLeftover(dir: string, inner: string, graceMs: number, shellDies = false) {
  const data = join(dir, "data");
  const wrapper = join(dir, "llama-server");
  const innerPid = join(dir, "inner.pid");
  writeFileSync(wrapper, `#!/bin/sh\nsh -c '${inner}echo $$ > ${innerPid}; exec sleep 60'\n`, {
    mode: 0o755,
  });
  const child = bunSpawner({ path: wrapper, argv: [], env: {} });
  let pid = 0;
  try {
    expect(await waitFor(() => lineWritten(innerPid))).toBe(true);
    pid = Number(readFileSync(innerPid, "utf8"));
    writePidRecord(data, { pid: child.pid, port: 0, binary: wrapper, argv: [], group: child.group });
    const file = pidFilePath(data);
    const record = JSON.parse(readFileSync(file, "utf8")) as PidRecord;
    writeFileSync(file, JSON.stringify({ ...record, owner: { pid: await deadPid(), start_time: null } }));
    if (shellDies) {
      // The shell alone killed (someone's `kill <pid>`): its llama-server stays in the group.
      process.kill(child.pid, "SIGKILL");
      await child.exited;
    }
    const outcomes = await reapLeftover(data, { ...configured(dir), graceMs });
    // Gone or a zombie (proc-info.ts isAlive): orphaned once its shell died, it is init's to reap,
    // which may take seconds (1.5 s here), though it was killed and its memory freed at once.
    return { outcomes, innerGone: await waitFor(() => !isAlive(pid), { timeoutMs: 3000, intervalMs: 5 }) };
  } finally {
    child.kill();
    if (pid > 0 && pidAlive(pid)) process.kill(pid, "SIGKILL");
  }
}

describe.skipIf(process.platform !== "linux")("reaping a llama-server left by a core killed outright", () => {
  test("the orphan survives its owner's kill -9 and the next start stops it", async () => {
    await using dir = tmpdir();
    const { childPid, record } = await orphanIn(dir.path);
    expect(pidAlive(childPid)).toBe(true);
    const t0 = Date.now();
    const outcomes = await reapLeftover(join(dir.path, "data"), configured(dir.path));
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(outcomes).toEqual([
      { file: record, kind: "llama-server", action: "stopped", pid: childPid, signal: "SIGTERM" },
    ]);
    // Gone or a zombie: orphaned by its owner's death, it is init's to collect (see reapWrapperLeftover).
    expect(await waitFor(() => !isAlive(childPid), { timeoutMs: 3000, intervalMs: 5 })).toBe(true);
    expect(readdirSync(join(dir.path, "data", "run")).filter((n) => n.endsWith(".json"))).toEqual([]);
  });

  test("refuses when the start time differs (pid reused), the binary is not the configured one, or the owner lives", async () => {
    await using dir = tmpdir();
    const { childPid, record } = await orphanIn(dir.path);
    const data = join(dir.path, "data");
    try {
      const original = JSON.parse(readFileSync(record, "utf8")) as PidRecord;

      // Another start time: the recorded process is gone (its pid now names another), so the
      // record is stale and goes; the process at that pid is left alone.
      writeFileSync(record, JSON.stringify({ ...original, start_time: "1" }));
      expect((await reapLeftover(data, configured(dir.path)))[0]?.action).toBe("not_ours");
      expect(pidAlive(childPid)).toBe(true);
      expect(existsSync(record)).toBe(false);

      // Our very process, but this core runs another llama-server: not explained, so kept.
      writeFileSync(record, JSON.stringify(original));
      const other = { configured: { "llama-server": [join(dir.path, "other-llama-server")] } };
      expect((await reapLeftover(data, other))[0]?.action).toBe("unexplained");
      expect(pidAlive(childPid)).toBe(true);
      expect(existsSync(record)).toBe(true);

      // An owner that is alive (here: a live process whose identity we record) keeps its child.
      const live = Bun.spawn(["sleep", "30"]);
      const liveStart = startTimeOf(live.pid);
      writeFileSync(record, JSON.stringify({ ...original, owner: { pid: live.pid, start_time: liveStart } }));
      expect((await reapLeftover(data, configured(dir.path)))[0]?.action).toBe("owner_alive");
      expect(pidAlive(childPid)).toBe(true);
      live.kill("SIGKILL");
    } finally {
      process.kill(childPid, "SIGKILL");
    }
  });

  test("a wrapper script killed with its core before readiness is reaped after it has exec'd", async () => {
    await using dir = tmpdir();
    const owner = Bun.spawn([process.execPath, EARLY_OWNER, dir.path], {
      stdout: "ignore",
      stderr: "ignore",
    });
    const record = pidFilePath(join(dir.path, "data"), owner.pid);
    expect(await waitFor(() => existsSync(record), { timeoutMs: 10_000 })).toBe(true);
    owner.kill("SIGKILL");
    await owner.exited;
    const { pid } = JSON.parse(readFileSync(record, "utf8")) as PidRecord;
    try {
      // Recorded while still the shell running the wrapper; now the exec'd stand-in.
      expect(
        await waitFor(() => readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("llama-stand-in/main.ts"), {
          timeoutMs: 5000,
        }),
      ).toBe(true);
      const outcomes = await reapLeftover(join(dir.path, "data"), configured(dir.path));
      expect(outcomes.map((o) => o.action)).toEqual(["stopped"]);
      expect(await waitFor(() => !isAlive(pid), { timeoutMs: 3000, intervalMs: 5 })).toBe(true);
      expect(existsSync(record)).toBe(false);
    } finally {
      if (pidAlive(pid)) process.kill(pid, "SIGKILL");
    }
  });

  test("a wrapper that runs llama-server without exec: the reap stops its process group, the server too", async () => {
    await using dir = tmpdir();
    const { outcomes, innerGone } = await reapWrapperLeftover(dir.path, "", 3000);
    // Its SIGTERM did it: the server, a zombie for init to collect, is not waited for nor SIGKILLed.
    expect(outcomes.map((o) => ("signal" in o ? o.signal : o.action))).toEqual(["SIGTERM"]);
    expect(innerGone).toBe(true);
  });

  test("a wrapper's shell that the reap's SIGTERM ends first: its llama-server ignoring it still gets the SIGKILL", async () => {
    await using dir = tmpdir();
    // The inner process ignores SIGTERM (a llama-server busy loading); the shell dies of it at once.
    const { outcomes, innerGone } = await reapWrapperLeftover(dir.path, `trap "" TERM; `, 300);
    expect(outcomes.map((o) => ("signal" in o ? o.signal : o.action))).toEqual(["SIGKILL"]);
    expect(innerGone).toBe(true);
  });

  test("a wrapper's shell that died before its core: its llama-server, left in the group, is still reaped", async () => {
    await using dir = tmpdir();
    const { outcomes, innerGone } = await reapWrapperLeftover(dir.path, "", 3000, true);
    expect(outcomes.map((o) => o.action)).toEqual(["stopped"]);
    expect(innerGone).toBe(true);
  });

  test("a hand-written record naming an unrelated process: not signalled, the record kept", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const unrelated = Bun.spawn(["sleep", "30"]);
    try {
      const cmdline = readFileSync(`/proc/${unrelated.pid}/cmdline`, "utf8").split("\0").join(" ").trim();
      const base = {
        pid: unrelated.pid,
        start_time: startTimeOf(unrelated.pid),
        cmdline,
        port: 8080,
        owner: { pid: await deadPid(), start_time: null },
        written_at: new Date().toISOString(),
      };
      const file = join(data, "run", "llama-server-999999.json");
      // As an older core wrote them (no binary), and naming the configured binary.
      for (const record of [base, { ...base, binary: join(dir.path, "llama-server"), argv: ["-m", "x"] }]) {
        mkdirSync(join(data, "run"), { recursive: true });
        writeFileSync(file, JSON.stringify(record));
        const outcomes = await reapLeftover(data, configured(dir.path));
        expect(outcomes.map((o) => o.action)).toEqual(["unexplained"]);
        await Bun.sleep(100);
        expect(pidAlive(unrelated.pid)).toBe(true);
        expect(existsSync(file)).toBe(true);
      }
    } finally {
      unrelated.kill("SIGKILL");
    }
  });

  test("a record that names no process of its own (not JSON, pid 0, -1 or 1, owner 0) is removed, nothing signalled", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(join(data, "run"), { recursive: true });
    const base = {
      start_time: "1",
      cmdline: "x",
      port: 8080,
      owner: { pid: await deadPid(), start_time: null },
      written_at: new Date().toISOString(),
    };
    const records = [
      "{ not json",
      JSON.stringify({ ...base, pid: 0 }),
      JSON.stringify({ ...base, pid: -1 }),
      JSON.stringify({ ...base, pid: 1 }),
      JSON.stringify({ ...base, pid: 4242.5 }),
      JSON.stringify({ ...base, pid: 999_999, owner: { pid: 0, start_time: null } }),
    ];
    const files = records.map((text, i) => {
      const file = join(data, "run", `llama-server-${900_000 + i}.json`);
      writeFileSync(file, text);
      return file;
    });
    const outcomes = await reapLeftover(data, configured(dir.path));
    expect(outcomes.map((o) => o.action)).toEqual(records.map(() => "unreadable"));
    expect(files.filter((f) => existsSync(f))).toEqual([]);
  });
});

// Records were read with readFileSync at every start: a FIFO at a record's name (a run folder made
// beforehand by another user in a data_dir others may write, which the core cannot tighten)
// blocked the start for good. In a child: a blocked read would block this test's thread too.
describe.skipIf(process.platform === "win32")("a process record that is not a regular file", () => {
  test("a FIFO is not waited on: unreadable, and its name cleared", () => {
    using dir = tmpdir();
    const run = join(dir.path, "run");
    mkdirSync(run, { recursive: true });
    const record = join(run, "llama-server-999999999.json");
    expect(spawnSync("mkfifo", [record]).status).toBe(0);
    const code = `import { reapLeftover } from ${JSON.stringify(join(import.meta.dir, "../../src/runtime/pid-file.ts"))};
      const o = await reapLeftover(${JSON.stringify(dir.path)}, { configured: { "llama-server": ["/x/llama-server"] } });
      console.log(JSON.stringify(o.map((r) => r.action)));`;
    // The limit only ends a child that hangs; it times nothing.
    const child = spawnSync(process.execPath, ["-e", code], { timeout: 20_000, encoding: "utf8" });
    expect({ signal: child.signal, out: child.stdout.trim() }).toEqual({
      signal: null,
      out: '["unreadable"]',
    });
    expect(existsSync(record)).toBe(false);
  });
});
