import { expect, test } from "bun:test";
import { type GroupProcReader, linuxGroupProc } from "../../src/platform/group-live.ts";
import { bunSpawnerWith, groupEnds } from "../../src/runtime/spawn.ts";

/**
 * A wrapper's shell reaped, its llama-server orphaned in the group: once that one has exited it is
 * a zombie until init collects it, which on this box's container (pid 1 no real init) took ~1.5 s,
 * and where nothing collects it (a core run as pid 1) never came: every stop and crash waited on
 * it (`groupLingers`: up to 60 s for `wholeExit`). The member here is a real `sleep`; /proc shows
 * it a zombie through a reader that rewrites its state, as the kernel shows an exited orphan.
 */
test.skipIf(process.platform !== "linux")(
  "a reaped wrapper whose group holds only a zombie does not linger; one that runs does",
  async () => {
    const zombies = new Set<number>();
    const proc: GroupProcReader = {
      *list() {
        for (const e of linuxGroupProc.list()) yield zombies.has(e.pid) ? { ...e, state: "Z" } : e;
      },
      entry: (pid) => {
        const e = linuxGroupProc.entry(pid);
        return e && zombies.has(pid) ? { ...e, state: "Z" } : e;
      },
      tasks: (pid) => linuxGroupProc.tasks(pid),
    };
    const child = bunSpawnerWith(
      () => true,
      proc,
    )({
      path: "/bin/sh",
      argv: ["-c", "sleep 30 & echo $!; wait"],
      env: {},
    });
    try {
      const reader = child.stdout.getReader();
      const member = Number(new TextDecoder().decode((await reader.read()).value).trim());
      expect(member).toBeGreaterThan(0);
      process.kill(child.pid, "SIGKILL");
      await child.exited;
      expect(child.groupLingers?.()).toBe(true);
      zombies.add(member);
      expect(child.groupLingers?.()).toBe(false);
      expect(await groupEnds(child, Date.now())).toBe(true);
    } finally {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    }
  },
);
