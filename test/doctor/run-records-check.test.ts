import { describe, expect, test } from "bun:test";
import {
  chownSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { runRecordsCheck } from "../../src/doctor/run-records-check.ts";
import { spaceOf } from "../../src/platform/pid-space.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { checkById, coreWithConfig, doctorDeps } from "./helpers/config-core.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

/** A record as runtime/pid-file.ts writes one (the fields its reader requires). */
function record(pid: number, ownerPid: number, start = "100", ownerStart = "50") {
  return JSON.stringify({
    kind: "llama-server",
    pid,
    start_time: start,
    cmdline: "llama-server -m x.gguf",
    owner: { pid: ownerPid, start_time: ownerStart },
    written_at: "2026-12-06T00:00:00Z",
  });
}

/** `count` records of dead cores (pids 5000…), each naming the live llama-server 1000. */
function deadCoresRecords(dataDir: string, count: number): void {
  const run = join(dataDir, "run");
  mkdirSync(run);
  for (let i = 0; i < count; i++)
    writeFileSync(join(run, `llama-server-${5000 + i}.json`), record(1000, 5000 + i));
}

/** Processes as the test says: pid 1000 (a llama-server started at 100) runs; its core, 999, is dead. */
const alive = (pid: number) => pid === 1000 || pid === 2000;
const identity = (pid: number) =>
  pid === 1000 || pid === 2000 ? { start_time: pid === 1000 ? "100" : "50", cmdline: "x" } : null;

describe.skipIf(process.platform === "win32")("doctor: run_records", () => {
  test("a dead core's llama-server still running is a warning naming its pid; nothing is written", async () => {
    using dir = tmpdir();
    const run = join(dir.path, "run");
    mkdirSync(run);
    writeFileSync(join(run, "llama-server-999.json"), record(1000, 999));
    const before = statSync(run).mtimeMs;
    const c = await runRecordsCheck(configAt(dir.path), { uid: process.getuid!(), alive, identity });
    expect(c).toMatchObject({ id: "run_records", status: "warn", data: { records: 1, leftover: 1 } });
    expect(c.message).toContain("llama-server pid 1000");
    expect(readdirSync(run)).toEqual(["llama-server-999.json"]);
    expect(statSync(run).mtimeMs).toBe(before);
  });

  test("run/ or run/mcp a symbolic link: not listed through it (a dead share's listing held the loop)", async () => {
    // data_dir fails such a folder (the core refuses links there) yet run_records still ran, and
    // listed the link's target on the core's loop: one on a network share gone offline held the
    // doctor method, ping and cancel with it, for good. Here the target answers, and is not read.
    using dir = tmpdir();
    const elsewhere = join(dir.path, "elsewhere");
    mkdirSync(join(elsewhere, "mcp"), { recursive: true });
    writeFileSync(join(elsewhere, "llama-server-999.json"), record(1000, 999));
    const data = join(dir.path, "data");
    mkdirSync(data);
    symlinkSync(elsewhere, join(data, "run"));
    const opts = { uid: process.getuid!(), alive, identity };
    expect(await runRecordsCheck(configAt(data), opts)).toMatchObject({ status: "ok", data: { records: 0 } });
    const real = join(dir.path, "real");
    mkdirSync(join(real, "run"), { recursive: true });
    symlinkSync(join(elsewhere, "mcp"), join(real, "run", "mcp"));
    writeFileSync(join(elsewhere, "mcp", "999-1000.json"), record(1000, 999));
    expect(await runRecordsCheck(configAt(real), opts)).toMatchObject({ status: "ok", data: { records: 0 } });
  });

  test("a running core's record, one whose process is gone, and one whose pid was reused: ok", async () => {
    using dir = tmpdir();
    const run = join(dir.path, "run");
    mkdirSync(run);
    writeFileSync(join(run, "llama-server-2000.json"), record(1000, 2000));
    writeFileSync(join(run, "llama-server-998.json"), record(3000, 998));
    writeFileSync(join(run, "llama-server-997.json"), record(1000, 997, "77"));
    writeFileSync(join(run, "llama-server-996.json"), "{not json");
    const c = await runRecordsCheck(configAt(dir.path), { uid: process.getuid!(), alive, identity });
    expect(c).toMatchObject({ status: "ok", data: { records: 4, leftover: 0, foreign: 0 } });
  });

  test("another user's record with its process alive: a warning (the core never acts on it)", async () => {
    using dir = tmpdir();
    const run = join(dir.path, "run");
    mkdirSync(run);
    const file = join(run, "llama-server-999.json");
    writeFileSync(file, record(1000, 999));
    const me = process.getuid!();
    if (me === 0) chownSync(file, 4321, 4321);
    // Not root: this user's file read as another's by posing as another uid.
    const c = await runRecordsCheck(configAt(dir.path), { uid: me === 0 ? 0 : me + 1, alive, identity });
    expect(c).toMatchObject({ status: "warn", data: { foreign: 1, leftover: 0 } });
    expect(c.message).toContain("another user");
  });

  test("another user's records: the fix names data_dir shell-quoted, its control characters marked", async () => {
    // The user's own config spelled it: C1's U+009B (ESC [ to some terminals) went raw into the
    // fix text, which a host shows from doctor's result as it is, and a space split the path.
    using dir = tmpdir();
    const data = join(dir.path, "my\u009b2J data");
    mkdirSync(join(data, "run"), { recursive: true });
    const file = join(data, "run", "llama-server-999.json");
    writeFileSync(file, record(1000, 999));
    const me = process.getuid!();
    if (me === 0) chownSync(file, 4321, 4321);
    const c = await runRecordsCheck(configAt(data), { uid: me === 0 ? 0 : me + 1, alive, identity });
    expect(c.fix).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(c.fix).toContain(`share '${join(dir.path, "my?2J data")}':`);
  });

  test("thousands of records: the report names at most 20 and reads a bounded number", async () => {
    using dir = tmpdir();
    deadCoresRecords(dir.path, 300);
    const c = await runRecordsCheck(configAt(dir.path), {
      uid: process.getuid!(),
      alive,
      identity,
      maxRead: 100,
    });
    expect(c.data).toMatchObject({ records: 300, unread: 200, leftover: 100 });
    expect((c.data as { findings: unknown[] }).findings).toHaveLength(20);
    expect(c.message).toContain("the first 100 of 300 read");
    expect(c.message.length).toBeLessThan(400);
  });

  test("a record far larger than any the core writes is not read (a planted one costs nothing)", async () => {
    // A record is a few hundred bytes (a command line, twice); doctor read each up to the
    // reaper's 8 MiB, so 200 planted ones were 1.6 GB read and parsed on the core's loop. One
    // past doctor's cap is left to the next start, as an unreadable one is.
    using dir = tmpdir();
    const run = join(dir.path, "run");
    mkdirSync(run);
    const huge = JSON.parse(record(1000, 999)) as Record<string, unknown>;
    huge.argv = ["llama-server", "x".repeat(1024 * 1024)];
    writeFileSync(join(run, "llama-server-999.json"), JSON.stringify(huge));
    const c = await runRecordsCheck(configAt(dir.path), { uid: process.getuid!(), alive, identity });
    expect(c).toMatchObject({ status: "ok", data: { records: 1, leftover: 0 } });
  });

  test("no data_dir or no run/: ok, nothing created", async () => {
    using dir = tmpdir();
    const data = join(dir.path, "missing");
    expect((await runRecordsCheck(configAt(data))).status).toBe("ok");
    expect(readdirSync(dir.path)).toEqual([]);
  });
});

test("doctor's report has the run_records check, over the configured data_dir", async () => {
  using dir = tmpdir();
  const core = coreWithConfig(dir.path, "app:\n  data_dir: ./data\n");
  const r = await runDoctor(core, doctorDeps);
  expect(checkById(r, "run_records")).toMatchObject({ status: "ok", data: { records: 0 } });
});

test("one record a turn of the loop: a ping queued meanwhile is answered before the last is read", async () => {
  using dir = tmpdir();
  deadCoresRecords(dir.path, 5);
  let asked = 0;
  let askedWhenPinged = -1;
  const counting = (pid: number) => {
    if (pid === 1000 && asked++ === 0)
      setImmediate(() => {
        askedWhenPinged = asked;
      });
    return identity(pid);
  };
  await runRecordsCheck(configAt(dir.path), { uid: process.getuid!(), alive, identity: counting });
  expect(asked).toBe(5);
  // Answered at all by the time the check ended, and before the fifth record was judged.
  expect(askedWhenPinged).toBeGreaterThan(0);
  expect(askedWhenPinged).toBeLessThan(5);
});

test("an MCP record's name of 128 KiB: the report shows 64 characters of it", async () => {
  using dir = tmpdir();
  mkdirSync(join(dir.path, "run", "mcp"), { recursive: true });
  const rec = { ...JSON.parse(record(1000, 999)), kind: "mcp", name: "n".repeat(2 ** 17) };
  writeFileSync(join(dir.path, "run", "mcp", "999-1000.json"), JSON.stringify(rec));
  const c = await runRecordsCheck(configAt(dir.path), { uid: process.getuid!(), alive, identity });
  expect(c).toMatchObject({ status: "warn", data: { leftover: 1 } });
  expect(c.message).toContain(`MCP server ${"n".repeat(64)} pid 1000`);
  expect(JSON.stringify(c).length).toBeLessThan(2000);
});

test("an MCP record's name with control characters: the report's one line shows none of them", async () => {
  // local-ai doctor prints a check's message as is on the user's terminal: a name read from a
  // record carried an escape sequence (colours, a cleared screen) or a line break there.
  using dir = tmpdir();
  mkdirSync(join(dir.path, "run", "mcp"), { recursive: true });
  const rec = { ...JSON.parse(record(1000, 999)), kind: "mcp", name: "a\u001b[2Jb\nc\u009bd" };
  writeFileSync(join(dir.path, "run", "mcp", "999-1000.json"), JSON.stringify(rec));
  const c = await runRecordsCheck(configAt(dir.path), { uid: process.getuid!(), alive, identity });
  expect(c.message).toContain("MCP server a?[2Jb?c?d pid 1000");
});

/** The configured llama-server, its drive answering, and pid 1000 running it (started at 100). */
const llamaAt = {
  configured: { "llama-server": ["/opt/llama/llama-server"] },
  driveAnswers: async () => true,
};
const llama = (pid: number) =>
  pid === 1000
    ? { start_time: "100", cmdline: "/opt/llama/llama-server -m x.gguf", exe: "/opt/llama/llama-server" }
    : null;

/** A dead core's record of the group pid 1000 led (gone), its member 1001 recorded, started by `binary`. */
function memberRecord(dataDir: string, binary: string): void {
  mkdirSync(join(dataDir, "run"), { recursive: true });
  const r = {
    ...JSON.parse(record(1000, 999)),
    binary,
    group: true,
    members: [{ pid: 1001, start_time: "101" }],
  };
  writeFileSync(join(dataDir, "run", "llama-server-999.json"), JSON.stringify(r));
}

/** Member 1001 running, the very process (its start time, in 1000's group), llama-server configured. */
const memberOpts = () => ({
  ...llamaAt,
  uid: process.getuid!(),
  alive: (pid: number) => pid === 1001,
  identity: (pid: number) => (pid === 1001 ? { start_time: "101", cmdline: "llama-server" } : null),
  groupOf: (pid: number) => (pid === 1001 ? 1000 : null),
});

// A `llama.binary` wrapper that does not exec runs llama-server as its child in the group it
// leads (docs/supervisor.md "Orphans"): its shell died, its llama-server stuck. The core's reaper
// stops that recorded member (runtime/leftover-stop.ts `leaderGone`), but doctor judged the record
// by its leader alone, gone, and said nothing of the orphan holding its memory.
test.skipIf(process.platform === "win32")("a recorded group member still running is a leftover", async () => {
  using dir = tmpdir();
  memberRecord(dir.path, "/opt/llama/llama-server");
  const opts = memberOpts();
  const c = await runRecordsCheck(configAt(dir.path), opts);
  expect(c).toMatchObject({ status: "warn", data: { leftover: 1 } });
  expect(c.message).toContain("pid 1001");
  // Its pid reused (another start time), or out of the group: none of ours, nothing said.
  const reused = {
    ...opts,
    identity: (pid: number) => (pid === 1001 ? { start_time: "7", cmdline: "x" } : null),
  };
  expect((await runRecordsCheck(configAt(dir.path), reused)).status).toBe("ok");
  expect((await runRecordsCheck(configAt(dir.path), { ...opts, groupOf: () => 4 })).status).toBe("ok");
});

// A core whose boot id read failed for a moment (EMFILE) recorded its space in part, then died
// during llama-server's load: the next start reaps that llama-server once shown to be the very
// one (runtime/pid-file.ts `reapIfShown`), but doctor read the record as another space's and
// said nothing of the orphan holding its memory meanwhile.
test.skipIf(process.platform !== "linux")(
  "a record of this space read in part: its live llama-server is a leftover",
  async () => {
    using dir = tmpdir();
    const run = join(dir.path, "run");
    mkdirSync(run);
    const partial = spaceOf(hostname(), "", readlinkSync("/proc/self/ns/pid"));
    const r = { ...JSON.parse(record(1000, 999)), owner: { pid: 999, start_time: "50", space: partial } };
    writeFileSync(join(run, "llama-server-999.json"), JSON.stringify(r));
    const c = await runRecordsCheck(configAt(dir.path), {
      ...llamaAt,
      uid: process.getuid!(),
      alive,
      identity: llama,
    });
    expect(c).toMatchObject({ status: "warn", data: { leftover: 1 } });
    // Its start time, but another program (a pid of a same-named machine's, here another process
    // started that tick): the reaper leaves it as another space's (pid-file.ts `reapIfShown`).
    const python = (pid: number) =>
      pid === 1000 ? { start_time: "100", exe: "/usr/bin/python3", cmdline: "python3" } : null;
    const notShown = await runRecordsCheck(configAt(dir.path), {
      ...llamaAt,
      uid: process.getuid!(),
      alive,
      identity: python,
    });
    expect(notShown.status).toBe("ok");
    // Its pid another process's now (another start time), or unread: nothing said.
    const other = await runRecordsCheck(configAt(dir.path), {
      uid: process.getuid!(),
      alive,
      identity: () => null,
    });
    expect(other.status).toBe("ok");
  },
);

// The reaper stops a gone leader's members only where the record's program is one this core runs
// (runtime/leftover-stop.ts `leaderGone`), else logs them and leaves them running; doctor said of
// them too "start the core once", which stopped nothing, the orphan kept holding its memory.
test.skipIf(process.platform === "win32")("members the reaper leaves: stop them by hand", async () => {
  using dir = tmpdir();
  memberRecord(dir.path, "/opt/other/wrapper.sh");
  const opts = memberOpts();
  const c = await runRecordsCheck(configAt(dir.path), opts);
  const leaves = { leftover: 1, findings: [{ pid: 1001, reaper: "leaves" }] };
  expect(c).toMatchObject({ status: "warn", data: leaves });
  expect(c.fix).not.toContain("start the core");
  expect(c.fix).toContain("stop pid 1001 yourself");
  // Its drive not answering: the reaper cannot tell, and leaves it too.
  const late = await runRecordsCheck(configAt(dir.path), { ...opts, driveAnswers: async () => false });
  expect(late.fix).toContain("stop pid 1001 yourself");
  // The configured program: the reaper stops it, and doctor says so.
  memberRecord(dir.path, "/opt/llama/llama-server");
  const stops = await runRecordsCheck(configAt(dir.path), opts);
  expect(stops).toMatchObject({ data: { findings: [{ pid: 1001, reaper: "stops" }] } });
  expect(stops.fix).toContain("start the core once");
});

// The same of a live leftover the reaper cannot show to be the one launched (`judgeAsked`
// "unexplained": logged, left running): "start the core once" stopped nothing there either.
test.skipIf(process.platform === "win32")("a leftover the reaper leaves: stop it by hand", async () => {
  using dir = tmpdir();
  mkdirSync(join(dir.path, "run"));
  const file = join(dir.path, "run", "llama-server-999.json");
  const opts = { ...llamaAt, uid: process.getuid!(), alive, identity: llama };
  writeFileSync(
    file,
    JSON.stringify({ ...JSON.parse(record(1000, 999)), binary: "/opt/llama/llama-server" }),
  );
  const stops = await runRecordsCheck(configAt(dir.path), opts);
  expect(stops).toMatchObject({ data: { findings: [{ pid: 1000, reaper: "stops" }] } });
  writeFileSync(file, JSON.stringify({ ...JSON.parse(record(1000, 999)), binary: "/opt/other/x" }));
  const leaves = await runRecordsCheck(configAt(dir.path), opts);
  expect(leaves).toMatchObject({ data: { findings: [{ pid: 1000, reaper: "leaves" }] } });
  expect(leaves.fix).toContain("stop pid 1000 yourself");
});

// Its start time unread (`identity` null: /proc or ps failing): the reaper leaves it ("unexplained",
// pid-file.ts `reapFile`), but nothing shows the pid is still the recorded process: a reused pid
// is another program. doctor told the user "stop pid 1000 yourself", naming what may be innocent.
test.skipIf(process.platform === "win32")(
  "a leftover whose start time is unread: no pid to stop",
  async () => {
    using dir = tmpdir();
    mkdirSync(join(dir.path, "run"));
    writeFileSync(join(dir.path, "run", "llama-server-999.json"), record(1000, 999));
    const opts = { ...llamaAt, uid: process.getuid!(), alive, identity: () => null };
    const c = await runRecordsCheck(configAt(dir.path), opts);
    expect(c).toMatchObject({ status: "warn", data: { findings: [{ pid: 1000, reaper: "leaves" }] } });
    expect(c.fix).not.toContain("stop pid 1000");
    expect(c.fix).toContain("start time");
  },
);
