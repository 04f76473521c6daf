import { describe, expect, spyOn, test } from "bun:test";
import { JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, joinCoreJob } from "../../../src/platform/windows/job.ts";
import { logger } from "../../../src/util/logger.ts";
import { fakeKernel32 } from "./fake-kernel32.ts";

const child = { workingSet: 1n, created: 1n, exe: "C:\\llama\\llama-server.exe" };

describe("the core's Job Object", () => {
  test("one kill-on-close job, no breakaway allowed, takes each child; its process handle is closed", () => {
    const { k, jobs, calls, openHandles } = fakeKernel32({ 40: child, 41: child });
    expect(joinCoreJob(40, k)).toBe(true);
    expect(joinCoreJob(41, k)).toBe(true);
    expect(calls.filter((c) => c === "CreateJobObjectW")).toHaveLength(1);
    const [job] = [...jobs.values()];
    // Exactly kill-on-close: a breakaway flag would let what the child starts leave the job.
    expect(job).toEqual({ flags: JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, pids: [40, 41] });
    expect(openHandles()).toBe(0);
  });

  test("a child already gone is not joined, and the next one is", () => {
    const { k, jobs } = fakeKernel32({ 41: child });
    expect(joinCoreJob(40, k)).toBe(false);
    expect(joinCoreJob(41, k)).toBe(true);
    expect([...jobs.values()][0]?.pids).toEqual([41]);
  });

  test("a job whose limit cannot be set is closed and never used; children run as before", () => {
    const { k, jobs, calls } = fakeKernel32({ 40: child }, { fail: new Set(["SetInformationJobObject"]) });
    expect(joinCoreJob(40, k)).toBe(false);
    expect(joinCoreJob(40, k)).toBe(false);
    expect(jobs.size).toBe(0);
    expect(calls.filter((c) => c === "CreateJobObjectW")).toHaveLength(1);
    expect(calls).not.toContain("AssignProcessToJobObject");
  });

  test("a refused assignment (a job that forbids nesting) says so, its handle closed", () => {
    const { k, openHandles } = fakeKernel32({ 40: child }, { fail: new Set(["AssignProcessToJobObject"]) });
    expect(joinCoreJob(40, k)).toBe(false);
    expect(openHandles()).toBe(0);
  });

  // docs/agent.md and docs/plan.md: a job that cannot be made *or nested* is logged once. A
  // refused assignment (Windows 7, where a child already in libuv's job joins no other) was not
  // logged at all: every child then ran outside the job with nothing said. One that had exited
  // by then (a probe of a few ms) is no sign of that, and says nothing.
  test("a refused assignment of a running child is logged once; of one that has exited, not", () => {
    const lines: string[] = [];
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      const gone = { ...child, exited: true };
      const refused = { fail: new Set(["AssignProcessToJobObject"]) };
      const a = fakeKernel32({ 39: gone, 40: child, 41: child }, refused);
      expect(joinCoreJob(39, a.k)).toBe(false);
      expect(lines).toEqual([]);
      expect(joinCoreJob(40, a.k)).toBe(false);
      expect(joinCoreJob(41, a.k)).toBe(false);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain("Job Object");
      expect(a.openHandles()).toBe(0);
    } finally {
      warn.mockRestore();
    }
  });

  test("off Windows there is no binding and nothing is done", () => {
    expect(joinCoreJob(40, null)).toBe(false);
  });
});
