import { expect, spyOn, test } from "bun:test";
import { existsSync, utimesSync, writeFileSync } from "node:fs";
import * as fsp from "node:fs/promises";
import { join } from "node:path";
import { keepOwnRecord, refreshOwnRecords } from "../../src/runtime/own-records.ts";
import { reapLeftover, removeRecordFile, writeMcpRecord } from "../../src/runtime/pid-file.ts";
import { untouchedLong } from "../../src/runtime/pid-record-read.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Another pid space's core (a second container or machine on this data folder) removes a record
// untouched for 30 days (pid-record-read.ts OTHER_SPACE_KEEP_MS). A core's records were written
// once, at its server's start: one whose MCP server or llama-server ran longer lost its record under
// it, live, and once that core was killed outright its successor never reaped the orphan. A live
// core renews its own records' time.
test("a live core's own record is touched, so another space never expires it", async () => {
  using dir = tmpdir();
  const file = writeMcpRecord(dir.path, { pid: process.pid, name: "tool", binary: "tool", argv: [] });
  expect(file).not.toBeNull();
  const long = (Date.now() - 31 * 86_400_000) / 1000;
  utimesSync(file as string, long, long);
  expect(untouchedLong(file as string)).toBe(true);
  await refreshOwnRecords();
  expect(untouchedLong(file as string)).toBe(false);
  const outcomes = await reapLeftover(dir.path, {
    configured: { mcp: ["tool"] },
    kill: () => {
      throw new Error("never signalled");
    },
    space: "elsewhere",
  });
  expect(outcomes.map((o) => o.action)).toEqual(["other_space"]);
  expect(existsSync(file as string)).toBe(true);
  // Removed by its core: no longer touched (never made again by a touch).
  removeRecordFile(file as string);
  await refreshOwnRecords();
  expect(existsSync(file as string)).toBe(false);
});

test("a record written again while a touch of its old file was under way stays renewed", async () => {
  using dir = tmpdir();
  // llama-server restarted under one name (pid-file.ts pidFilePath): the old record removed, the
  // new one written, while the daily touch of the old (slow on a share) was still out.
  const file = join(dir.path, "llama-server-1.json");
  writeFileSync(file, "{}");
  keepOwnRecord(file);
  const touch = spyOn(fsp, "lutimes").mockImplementationOnce(async () => {
    removeRecordFile(file);
    writeFileSync(file, "{}");
    keepOwnRecord(file);
    throw Object.assign(new Error("gone"), { code: "ENOENT" });
  });
  try {
    await refreshOwnRecords();
  } finally {
    touch.mockRestore();
  }
  const long = (Date.now() - 31 * 86_400_000) / 1000;
  utimesSync(file, long, long);
  await refreshOwnRecords();
  expect(untouchedLong(file)).toBe(false);
  removeRecordFile(file);
});
