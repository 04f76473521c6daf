import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { earlierLogsRedacted, earlierLogsSettled } from "../../src/runtime/log-scrub.ts";
import { Supervisor } from "../../src/runtime/supervisor.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { rejection, SETTINGS, testPlan } from "./helpers/harness.ts";

// The launcher makes llama-server's log (its folder, the earlier logs' pass) before the plan, so
// that file work overlaps the probe (docs/performance.md). A folder it cannot make must not hide
// the plan's own error: a user with a missing model and a `logs` that is a file was told of an
// EEXIST from mkdir (no code of the protocol's) instead of model_missing naming the model.

const stops: Supervisor[] = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s.stop();
});

function supervisor(dataDir: string, plan: () => Promise<never>): Supervisor {
  const s = new Supervisor({
    findBinary: () => ({ path: "/nonexistent/llama-server" }),
    plan,
    dataDir: () => dataDir,
    settings: () => SETTINGS,
    reap: false,
  });
  stops.push(s);
  return s;
}

test("a plan's model_missing is the start's error even when the log folder cannot be made", async () => {
  using dir = tmpdir();
  const dataDir = join(dir.path, "data");
  mkdirSync(dataDir);
  writeFileSync(join(dataDir, "logs"), "a file where the log folder goes");
  const missing = new CoreError("model_missing", "model file not found: /m.gguf");
  const s = supervisor(dataDir, async () => {
    throw missing;
  });
  const err = await rejection(s.acquire(new AbortController().signal));
  expect(err).toBeInstanceOf(CoreError);
  expect(err.code).toBe("model_missing");
});

test("a log folder that cannot be made still fails a start whose plan succeeds", async () => {
  using dir = tmpdir();
  const dataDir = join(dir.path, "data");
  mkdirSync(dataDir);
  writeFileSync(join(dataDir, "logs"), "a file where the log folder goes");
  const s = new Supervisor({
    findBinary: () => ({ path: "/nonexistent/llama-server" }),
    plan: async () => testPlan("/m.gguf"),
    dataDir: () => dataDir,
    settings: () => SETTINGS,
    reap: false,
    spawner: () => {
      throw new Error("not to be spawned");
    },
  });
  stops.push(s);
  const err = await rejection(s.acquire(new AbortController().signal));
  expect(String((err as Error).message)).toContain("EEXIST");
});

test("a stop during the plan makes no log after it, the folder made usable meanwhile", async () => {
  // The shutdown waits for the earlier logs' pass it finds (services.ts): one begun after it
  // rewrote files while the core exited.
  using dir = tmpdir();
  const dataDir = join(dir.path, "data");
  mkdirSync(dataDir);
  writeFileSync(join(dataDir, "logs"), "a file where the log folder goes");
  let stopping: Promise<void> | undefined;
  const s = supervisor(dataDir, async () => {
    rmSync(join(dataDir, "logs"));
    stopping = s.stop();
    return testPlan("/m.gguf") as never;
  });
  const err = await rejection(s.acquire(new AbortController().signal));
  await stopping;
  expect(err.code).toBe("cancelled");
  expect(existsSync(join(dataDir, "logs"))).toBe(false);
});

/** A pass under way hands out its one promise each time; none, a fresh resolved one. */
function passUnderWay(dir: string): boolean {
  const first = earlierLogsRedacted(dir);
  return earlierLogsRedacted(dir) === first;
}

test("a stop during the plan finds the earlier logs' pass already begun, for the shutdown to wait for", async () => {
  // The shutdown waits for the passes under way (earlierLogsSettled, services.ts). Begun after
  // the plan, as before 46596b33, a stop during the plan let one begin after the shutdown's wait.
  using dir = tmpdir();
  const dataDir = join(dir.path, "data");
  const logs = join(dataDir, "logs");
  mkdirSync(logs, { recursive: true });
  writeFileSync(join(logs, "llama-server.log"), "an earlier core's line quoting a reply\n");
  let begun = false;
  let stopping: Promise<void> | undefined;
  const s = supervisor(dataDir, async () => {
    begun = passUnderWay(logs);
    stopping = s.stop();
    return testPlan("/m.gguf") as never;
  });
  const err = await rejection(s.acquire(new AbortController().signal));
  await stopping;
  await earlierLogsSettled();
  expect(err.code).toBe("cancelled");
  expect(begun).toBe(true);
  expect(passUnderWay(logs)).toBe(false);
});
