import { logger } from "../../util/logger.ts";
import { type Handle, type Kernel32, kernel32 } from "./kernel32.ts";

/**
 * The core's Job Object on Windows: what it starts without a guard (no /bin/sh there) and joins
 * to it dies with the core, however the core ends (TerminateProcess, a crash), and so does
 * everything that process starts afterwards. The core holds the job's only handle (not
 * inheritable: null attributes); the kernel closes it when the core dies, and
 * JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE then ends every process in the job (Microsoft's "Job
 * Objects"). Why not libuv's own job, in which Bun already starts each child: it sets
 * JOB_OBJECT_LIMIT_SILENT_BREAKAWAY_OK, so a child's own children join no job at all, and a
 * wrapper's llama-server or a `.cmd` shim's server outlived the core. This job allows no
 * breakaway, and it nests under libuv's (Windows 8+): a child's children stay in the immediate
 * job, whatever the jobs above it allow. A child is joined right after its spawn; what it starts
 * before that escapes, since `Bun.spawn` cannot start a process suspended. The binding is a
 * parameter so tests hand in a fake.
 */

/** JOBOBJECTINFOCLASS JobObjectExtendedLimitInformation. */
const EXTENDED_LIMIT_INFORMATION = 9;
/**
 * JOBOBJECT_EXTENDED_LIMIT_INFORMATION (x64): the basic limits (two LARGE_INTEGERs, LimitFlags at
 * 16, …, 64 bytes), IO_COUNTERS (48), then four SIZE_Ts.
 */
export const EXTENDED_LIMIT_SIZE = 144;
export const LIMIT_FLAGS_OFFSET = 16;
export const JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000;
// The least AssignProcessToJobObject requires of the process handle, and SYNCHRONIZE to tell
// whether a child it refused had exited by then.
const PROCESS_TERMINATE = 0x0001;
const PROCESS_SET_QUOTA = 0x0100;
const SYNCHRONIZE = 0x0010_0000;
const WAIT_OBJECT_0 = 0;

/** The job per binding (a fake's apart from the real one); null once it could not be made. */
const jobs = new WeakMap<Kernel32, Handle | null>();
/** The bindings whose job refused a running child (said once). */
const refusedOnce = new WeakSet<Kernel32>();

function coreJob(k: Kernel32): Handle | null {
  const known = jobs.get(k);
  if (known !== undefined) return known;
  let job: Handle | null = null;
  try {
    job = k.CreateJobObjectW(null, null);
    if (job) {
      const limits = new Uint8Array(EXTENDED_LIMIT_SIZE);
      new DataView(limits.buffer).setUint32(LIMIT_FLAGS_OFFSET, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, true);
      if (!k.SetInformationJobObject(job, EXTENDED_LIMIT_INFORMATION, limits, EXTENDED_LIMIT_SIZE)) {
        k.CloseHandle(job);
        job = null;
      }
    }
  } catch {
    job = null;
  }
  // Once: each child then runs as before, tied to the core by libuv's job alone.
  if (!job) logger.warn("no Job Object for the core's children: what they start may outlive the core");
  jobs.set(k, job);
  return job;
}

/**
 * Joins process `pid` (a child just spawned) to the core's job; false where that could not be
 * done (not Windows, the process gone, a job that forbids nesting), and the child runs as before.
 * Called before the event loop turns: Bun holds the child's handle till then, so its pid is not
 * another process's yet even if it has exited.
 */
export function joinCoreJob(pid: number, k: Kernel32 | null = kernel32()): boolean {
  if (!k || !Number.isInteger(pid) || pid <= 0 || pid > 0xffff_ffff) return false;
  const job = coreJob(k);
  if (!job) return false;
  const proc = k.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE | SYNCHRONIZE, 0, pid);
  if (!proc) return false;
  try {
    if (k.AssignProcessToJobObject(job, proc) !== 0) return true;
    const error = k.GetLastError();
    // A job that forbids nesting (before Windows 8 a child already in libuv's job joins no
    // other): every child then runs outside ours. One that had exited tells nothing of that.
    if (!refusedOnce.has(k) && k.WaitForSingleObject(proc, 0) !== WAIT_OBJECT_0) {
      refusedOnce.add(k);
      logger.warn(
        `a child could not join the core's Job Object (error ${error}): what children start may outlive the core`,
      );
    }
    return false;
  } catch {
    return false;
  } finally {
    k.CloseHandle(proc);
  }
}
