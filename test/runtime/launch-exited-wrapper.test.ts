import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { FAKE_SERVER_SCRIPT } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

// A parked zeroing of a KV file waits for its server's exit (agent/kv/slot-clear.ts `exitSeen`).
// A llama.binary wrapper that does not `exec` (docs/supervisor.md) dies of the stop's SIGTERM at
// once, its llama-server still ending the save it runs: `exited` was the shell's, so the file was
// zeroed under that write. It is now the whole group's end. The stand-in ignores SIGTERM (alive
// through its grace, as a llama-server finishing a task is).
test.skipIf(process.platform !== "linux")(
  "behind a wrapper, a launch's exited waits for the llama-server it runs, not the shell alone",
  async () => {
    await using dir = tmpdir();
    const wrapper = join(dir.path, "wrapper");
    writeFileSync(
      wrapper,
      `#!/bin/sh\nexport FAKE_LLAMA_NO_CHILD_MODE=1 FAKE_LLAMA_LOAD_MS=20 FAKE_LLAMA_IGNORE_SIGTERM=1\n"${process.execPath}" "${FAKE_SERVER_SCRIPT}" "$@"\n`,
      { mode: 0o755 },
    );
    const { supervisor } = makeSupervisor(dir.path, {
      settings: { stopGraceMs: 300 },
      options: { findBinary: () => ({ path: wrapper }) },
    });
    const lease = await supervisor.acquire(new AbortController().signal);
    const { launch } = lease;
    const shell = supervisor.snapshot().pid as number;
    const server = Number(
      readFileSync(`/proc/${shell}/task/${shell}/children`, "utf8").trim().split(/\s+/)[0],
    );
    expect(server).toBeGreaterThan(0);
    lease.release();
    const stopped = supervisor.stop();
    await launch.exited;
    // A zombie has ended (its write with it): the group counts as gone then (platform/group-live.ts),
    // and an orphan waits for init to collect it, which a loaded box is slow to do.
    const serverAlive = isAlive(server);
    await stopped;
    expect(serverAlive).toBe(false);
  },
);
