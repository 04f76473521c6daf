import { describe, expect, test } from "bun:test";
import { workFingerprint } from "../../src/runtime/proc-info.ts";

// The start-up timeout's sign of progress (docs/supervisor.md "Start-up timeout"). llama-server
// loads on its main thread while its HTTP threads answer the core's own /health polls: a load
// stuck on a frozen RPC worker (SIGSTOP) kept "progressing" on the polls' CPU alone and waited
// 10 × llama.startup_timeout_s (seen with the real llama-server and ggml-rpc-server).
const onLinux = process.platform === "linux";

function child(source: string) {
  return Bun.spawn([process.execPath, "-e", source], { stdout: "ignore", stderr: "ignore" });
}

/** The fingerprint once the child has settled, and again after `ms`. */
async function twoLooks(pid: number, ms: number): Promise<[string | null, string | null]> {
  await Bun.sleep(700);
  const a = workFingerprint(pid);
  await Bun.sleep(ms);
  return [a, workFingerprint(pid)];
}

describe.skipIf(!onLinux)("workFingerprint", () => {
  test("CPU spent by another thread while the main thread waits is not progress", async () => {
    // Main thread blocked for good; a second thread burns CPU, as the HTTP threads answering
    // /health do while the load waits on a worker that never answers.
    const proc = child(
      `new Worker(URL.createObjectURL(new Blob(["for(;;){}"]))); setTimeout(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0), 300);`,
    );
    try {
      const [a, b] = await twoLooks(proc.pid, 500);
      expect(a).not.toBeNull();
      expect(b).toBe(a);
    } finally {
      proc.kill("SIGKILL");
      await proc.exited;
    }
  }, 10_000);

  test("CPU spent by the main thread is progress", async () => {
    const proc = child("for(;;){}");
    try {
      const [a, b] = await twoLooks(proc.pid, 500);
      expect(a).not.toBeNull();
      expect(b).not.toBe(a);
    } finally {
      proc.kill("SIGKILL");
      await proc.exited;
    }
  }, 10_000);

  test("no per-thread stat: the whole process's CPU is the sign, not none at all", () => {
    const stat = (utime: number) =>
      `4242 (llama (server)) S 1 4242 4242 0 -1 4194560 900 0 7 0 ${utime} 20 0 0 20 0 9 0 100 0 0`;
    let utime = 100;
    const read = (path: string) => {
      if (path.includes("/task/")) throw new Error("EACCES");
      if (path.endsWith("/io")) return "rchar: 5\n";
      return stat(utime);
    };
    const a = workFingerprint(4242, read);
    utime = 150;
    const b = workFingerprint(4242, read);
    expect(a).not.toBeNull();
    expect(b).not.toBeNull();
    expect(b).not.toBe(a);
    // Unchanged counters are no progress.
    expect(workFingerprint(4242, read)).toBe(b);
  });
});
