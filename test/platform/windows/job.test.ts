import { describe, expect, test } from "bun:test";
import { JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, joinCoreJob } from "../../../src/platform/windows/job.ts";
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

  test("off Windows there is no binding and nothing is done", () => {
    expect(joinCoreJob(40, null)).toBe(false);
  });
});
