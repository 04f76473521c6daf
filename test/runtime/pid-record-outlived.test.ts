import { expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { pidSpace } from "../../src/platform/pid-space.ts";
import {
  LLAMA_RECORD_NAME,
  pidFilePath,
  readRecord,
  recordAfterStop,
  runDir,
  writePidRecord,
} from "../../src/runtime/pid-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A halt removed this core's llama-server record whether or not its kill was taken: a server
// that outlived it (stuck in the GPU driver) was then recorded nowhere, so no later core reaped
// it and it held its memory for good (docs/supervisor.md). This test's own process stands in
// for the live server (a pid whose start time can be read), `alive` for the kill's outcome.
function recorded(dir: string, instance?: string) {
  const child = { pid: process.pid, binary: process.execPath, argv: [process.execPath] };
  writePidRecord(dir, { ...child, port: 1 }, instance);
  return Promise.withResolvers<void>();
}

test("a server that outlived its stop keeps its record, off the next start's name, till its exit", async () => {
  using dir = tmpdir();
  const exit = recorded(dir.path, "b");
  recordAfterStop(dir.path, "b", { pid: process.pid, exited: exit.promise }, () => true);
  expect(existsSync(pidFilePath(dir.path, process.pid, "b"))).toBe(false);
  const kept = readdirSync(runDir(dir.path)).filter((n) => n.endsWith(".json"));
  expect(kept).toEqual([`llama-server-${process.pid}.${pidSpace()}-b-outlived-${process.pid}.json`]);
  // A name the reaper reads (reapLeftover's pattern), holding the server's pid.
  expect(kept[0]).toMatch(LLAMA_RECORD_NAME);
  const file = `${runDir(dir.path)}/${kept[0]}`;
  expect((readRecord(file, undefined) as { pid: number }).pid).toBe(process.pid);
  exit.resolve();
  await exit.promise;
  await Bun.sleep(0);
  expect(existsSync(file)).toBe(false);
});

test("a server gone by its stop's end has its record removed", () => {
  using dir = tmpdir();
  const exit = recorded(dir.path);
  recordAfterStop(dir.path, undefined, { pid: process.pid, exited: exit.promise }, () => false);
  expect(readdirSync(runDir(dir.path)).filter((n) => n.endsWith(".json"))).toEqual([]);
});

// A wrapper that does not `exec`: its shell (the recorded pid) reaped by the stop's end while its
// llama-server, stuck, lingers in the group (spawn.ts `groupLingers`). The record was removed, so
// a core killed later left that llama-server to no reaper.
test("a wrapper's shell gone while its group lingers: the record is kept till the group ends", async () => {
  using dir = tmpdir();
  const exit = recorded(dir.path);
  let lingers = true;
  recordAfterStop(
    dir.path,
    undefined,
    { pid: process.pid, exited: exit.promise, groupLingers: () => lingers },
    () => false,
  );
  const kept = readdirSync(runDir(dir.path)).filter((n) => n.endsWith(".json"));
  expect(kept).toEqual([`llama-server-${process.pid}.${pidSpace()}-outlived-${process.pid}.json`]);
  lingers = false;
  exit.resolve();
  await exit.promise;
  await Bun.sleep(0);
  await Bun.sleep(0);
  expect(existsSync(`${runDir(dir.path)}/${kept[0]}`)).toBe(false);
});
