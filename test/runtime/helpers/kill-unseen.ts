import { readFileSync } from "node:fs";

/**
 * SIGKILLs `pid` and waits, without yielding to the event loop, until the kernel shows it dead
 * (a zombie): this process has had no tick in which to see the exit, as a core that reads a chat
 * line in that moment has not. Its port may still take connections a moment longer, while the
 * kernel releases the socket. Linux only (/proc).
 */
export function killUnseen(pid: number): void {
  process.kill(pid, "SIGKILL");
  const deadline = Date.now() + 3000;
  while (Date.now() < deadline) {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return;
  }
  throw new Error(`pid ${pid} did not die`);
}
