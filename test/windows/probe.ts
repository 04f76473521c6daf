import os from "node:os";
import { type RunResult, runWithTimeout } from "../../src/plan/run-probe.ts";
import { joinCoreJob } from "../../src/platform/windows/job.ts";
import {
  windowsPidAlive,
  windowsProcessIdentity,
  windowsResidentBytes,
} from "../../src/platform/windows/process.ts";
import { windowsPhysicalMemory, windowsProcessorCores } from "../../src/platform/windows/system.ts";
import { fileTimeTicks, type HostPlan, type ProbeObservation } from "./observations.ts";

/**
 * The Windows readings taken for real: of the host itself, of a core it spawns (another
 * process: identity, memory, alive while it runs and dead after), and of the machine.
 */
export async function probe(plan: HostPlan, hostStartedMs: number): Promise<ProbeObservation> {
  const before = fileTimeTicks(Date.now() - 1000).toString();
  const child = Bun.spawn([plan.core, "serve-stdio"], {
    cwd: plan.emptyDir,
    stdin: "pipe",
    stdout: "ignore",
    stderr: "ignore",
    windowsHide: true,
  });
  const after = fileTimeTicks(Date.now() + 1000).toString();
  await Bun.sleep(500);
  const running = {
    identity: windowsProcessIdentity(child.pid),
    residentBytes: windowsResidentBytes(child.pid),
    aliveWhileRunning: windowsPidAlive(child.pid),
  };
  child.stdin.end(); // EOF: the core exits 0
  await child.exited;
  // A probe as the core runs one: joined to the Job Object for real (nested under libuv's).
  let joined: boolean | null = null;
  const version: RunResult = await runWithTimeout(plan.core, ["--version"], 10_000, undefined, {
    platform: "win32",
    joinJob: (pid) => (joined = joinCoreJob(pid)),
  });
  return {
    scenario: "probe",
    pid: process.pid,
    residentBytes: windowsResidentBytes(process.pid),
    runtimeRss: process.memoryUsage.rss(),
    identity: windowsProcessIdentity(process.pid),
    hostStartedTicks: fileTimeTicks(hostStartedMs).toString(),
    execPath: process.execPath,
    cores: windowsProcessorCores(),
    logicalFromOs: os.cpus().length,
    memory: windowsPhysicalMemory(),
    osTotalBytes: os.totalmem(),
    aliveSelf: windowsPidAlive(process.pid),
    child: { ...running, spawnedBetween: [before, after], aliveAfterExit: windowsPidAlive(child.pid) },
    // Windows pids are multiples of 4; this one is far above any Wine or Windows hands out here.
    noSuchPid: windowsPidAlive(0x7fff_fff0),
    job: { joined, probe: version.kind === "exit" ? version.code : version.kind },
  };
}
