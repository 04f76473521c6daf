import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runWithTimeout } from "../../src/plan/probe.ts";
import { descendantsOf, type ProcReader } from "../../src/platform/process-tree.ts";
import { alive } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

const table = (pairs: [number, number][]): ProcReader => ({ parents: () => pairs });

describe("descendantsOf", () => {
  test("children and grandchildren, not siblings or the parent", () => {
    const proc = table([
      [10, 1],
      [11, 10],
      [12, 10],
      [13, 11],
      [20, 1],
      [21, 20],
    ]);
    expect(descendantsOf(10, proc).sort()).toEqual([11, 12, 13]);
    expect(descendantsOf(13, proc)).toEqual([]);
  });

  test("a cycle in what was read ends the walk", () => {
    expect(
      descendantsOf(
        5,
        table([
          [6, 5],
          [5, 6],
        ]),
      ),
    ).toEqual([6]);
  });
});

// docs/doctor.md: a probe (`llama-server --version`, `--help`) that does not answer in time is
// killed with what it started. A wrapper script that runs the binary without `exec` left it
// running after the script was killed.
describe.skipIf(process.platform !== "linux")("a probe that times out", () => {
  test("takes the wrapper script's own child with it", async () => {
    await using dir = tmpdir();
    const pidFile = join(dir.path, "child.pid");
    const script = join(dir.path, "llama-server");
    await Bun.write(script, `#!/bin/sh\nsleep 30 &\necho $! > '${pidFile}'\nwait\n`);
    Bun.spawnSync(["chmod", "+x", script]);
    const r = await runWithTimeout(script, ["--version"], 500);
    expect(r.kind).toBe("timeout");
    const child = Number(readFileSync(pidFile, "utf8"));
    expect(child).toBeGreaterThan(0);
    expect(await waitFor(() => !alive(child), { timeoutMs: 2000 })).toBe(true);
  });
});
