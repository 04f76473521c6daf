import { expect, test } from "bun:test";
import { bunSpawnerWith } from "../../src/runtime/spawn.ts";

// On Windows llama-server joins the core's Job Object (platform/windows/job.ts), so that what it
// starts dies with the core too; here the join is a fake and the child a shell saying its pid.
test.skipIf(process.platform === "win32")(
  "each llama-server spawned is joined to the core's job",
  async () => {
    const joined: number[] = [];
    const spawn = bunSpawnerWith((pid) => joined.push(pid) > 0);
    const child = spawn({ path: "/bin/sh", argv: ["-c", 'echo "$$"'], env: {} });
    const pid = Number((await new Response(child.stdout).text()).trim());
    expect(await child.exited).toEqual({ code: 0, signal: null });
    expect(joined).toEqual([pid]);
  },
);
