import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type PidRecord, reapLeftover } from "../../src/runtime/pid-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { pidAlive, waitFor } from "./helpers/harness.ts";

const OWNER = join(import.meta.dir, "helpers", "owner.ts");

/** Starts a supervisor in a separate process, SIGKILLs that process, returns the orphan's pid. */
async function orphanIn(dir: string): Promise<{ childPid: number; record: string }> {
  const owner = Bun.spawn([process.execPath, OWNER, dir], {
    stdout: "pipe",
    stderr: "ignore",
    env: { ...process.env },
  });
  const reader = owner.stdout.getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const childPid = Number(text.match(/READY (\d+)/)?.[1]);
  expect(childPid).toBeGreaterThan(0);
  owner.kill("SIGKILL");
  await owner.exited;
  const runDir = join(dir, "data", "run");
  const name = readdirSync(runDir).find((n) => n === `llama-server-${owner.pid}.json`);
  expect(name).toBeDefined();
  return { childPid, record: join(runDir, name as string) };
}

describe.skipIf(process.platform !== "linux")("reaping a llama-server left by a core killed outright", () => {
  test("the orphan survives its owner's kill -9 and the next start stops it", async () => {
    await using dir = tmpdir();
    const { childPid, record } = await orphanIn(dir.path);
    expect(pidAlive(childPid)).toBe(true);
    const t0 = Date.now();
    const outcomes = await reapLeftover(join(dir.path, "data"));
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(outcomes).toEqual([{ file: record, action: "stopped", pid: childPid, signal: "SIGTERM" }]);
    expect(await waitFor(() => !pidAlive(childPid), { timeoutMs: 3000 })).toBe(true);
    expect(readdirSync(join(dir.path, "data", "run")).filter((n) => n.endsWith(".json"))).toEqual([]);
  });

  test("refuses when the recorded start time or command line differ (pid reused), and when the owner lives", async () => {
    await using dir = tmpdir();
    const { childPid, record } = await orphanIn(dir.path);
    try {
      const original = JSON.parse(readFileSync(record, "utf8")) as PidRecord;

      writeFileSync(record, JSON.stringify({ ...original, start_time: "1" }));
      expect((await reapLeftover(join(dir.path, "data")))[0]?.action).toBe("not_ours");
      expect(pidAlive(childPid)).toBe(true);

      writeFileSync(record, JSON.stringify({ ...original, cmdline: `${original.cmdline} --other` }));
      expect((await reapLeftover(join(dir.path, "data")))[0]?.action).toBe("not_ours");
      expect(pidAlive(childPid)).toBe(true);

      // An owner that is alive (here: a live process whose identity we record) keeps its child.
      const live = Bun.spawn(["sleep", "30"]);
      const liveStart = readFileSync(`/proc/${live.pid}/stat`, "utf8")
        .split(") ")[1]
        ?.split(" ")[19] as string;
      writeFileSync(record, JSON.stringify({ ...original, owner: { pid: live.pid, start_time: liveStart } }));
      expect((await reapLeftover(join(dir.path, "data")))[0]?.action).toBe("owner_alive");
      expect(pidAlive(childPid)).toBe(true);
      live.kill("SIGKILL");
    } finally {
      process.kill(childPid, "SIGKILL");
    }
  });
});
