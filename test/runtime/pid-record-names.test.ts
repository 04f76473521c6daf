import { expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { runRecordsCheck } from "../../src/doctor/run-records-check.ts";
import { pidSpace, spaceOf } from "../../src/platform/pid-space.ts";
import {
  mcpDir,
  type PidRecord,
  pidFilePath,
  reapLeftover,
  runDir,
  writeMcpRecord,
  writePidRecord,
} from "../../src/runtime/pid-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Two containers sharing one data folder, each core pid 1 (or 7): a record named by the core's
// pid alone was written over by the other's, so once one core died its llama-server had no
// record for the next core to reap, and either core's stop removed the other's record.

const A = spaceOf("box-a", "boot", "pid:[4026532001]");
const B = spaceOf("box-b", "boot", "pid:[4026532002]");

test("two cores of one pid in two pid spaces name their records apart, llama-server's and MCP's", () => {
  using dir = tmpdir();
  expect(pidFilePath(dir.path, 1, undefined, A)).not.toBe(pidFilePath(dir.path, 1, undefined, B));
  expect(pidFilePath(dir.path, 1, "m2", A)).not.toBe(pidFilePath(dir.path, 1, "m2", B));
  // This core's own, as written: its space in the name.
  const child = { pid: process.pid, binary: "/bin/true", argv: [] as string[] };
  writePidRecord(dir.path, { ...child, port: 1 });
  expect(existsSync(pidFilePath(dir.path))).toBe(true);
  expect(basename(pidFilePath(dir.path))).toContain(pidSpace());
  const mcp = writeMcpRecord(dir.path, { ...child, name: "fs" });
  expect(basename(mcp ?? "")).toContain(pidSpace());
});

function record(kind: "llama-server" | "mcp", space?: string): PidRecord {
  return {
    kind,
    pid: 4242,
    start_time: "100",
    cmdline: "llama-server",
    owner: { pid: 4241, start_time: "99", ...(space ? { space } : {}) },
    written_at: new Date(0).toISOString(),
  };
}

test("an older core's records (named by its pid alone) and a newer one's are reaped and checked alike", async () => {
  using dir = tmpdir();
  mkdirSync(mcpDir(dir.path), { recursive: true, mode: 0o700 });
  const here = pidSpace();
  const files = [
    [join(runDir(dir.path), "llama-server-4241.json"), record("llama-server")],
    [join(runDir(dir.path), "llama-server-4241-m2.json"), record("llama-server")],
    [pidFilePath(dir.path, 4241, "m3", here), record("llama-server", here)],
    [join(mcpDir(dir.path), "4241-4242.json"), record("mcp")],
    [join(mcpDir(dir.path), `4241.${here}-4243.json`), record("mcp", here)],
  ] as const;
  for (const [file, r] of files) writeFileSync(file, JSON.stringify(r), { mode: 0o600 });
  const check = await runRecordsCheck(ConfigSchema.parse({ app: { data_dir: dir.path } }), {
    alive: () => false,
    identity: () => null,
  });
  expect(check.data?.records).toBe(files.length);
  const outcomes = await reapLeftover(dir.path, {
    configured: { "llama-server": ["llama-server"], mcp: ["llama-server"] },
    alive: () => false,
    identity: () => null,
    kill: () => {
      throw new Error("never signalled");
    },
  });
  expect(outcomes.map((o) => o.action)).toEqual(files.map(() => "gone"));
  for (const [file] of files) expect(existsSync(file)).toBe(false);
});
