import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnMcpServer } from "../../src/agent/mcp/child.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// What the guard (src/agent/mcp/guard.ts) hands the shell: the server it runs must be the one
// the config names, with the environment the config gives it.

const PATH = process.env.PATH ?? "/usr/bin:/bin";

function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** What a guarded server wrote to stdout, and how it exited. */
async function run(command: string, env: Record<string, string>, cwd?: string) {
  const child = spawnMcpServer({ command, args: [], env, cwd }, true);
  const stdout = await new Response(child.stdout).text();
  return { stdout, exit: await child.exited };
}

describe.skipIf(process.platform === "win32")("the MCP guard's command", () => {
  test("a command at a relative path that starts with a dash runs from its cwd", async () => {
    using dir = tmpdir();
    // `"command": "-tools/server"` with a cwd: handed on as it is, the kernel ran its #! line as
    // `/bin/sh -tools/server`, and the shell read the path as options (exit 2).
    mkdirSync(join(dir.path, "-tools"));
    script(join(dir.path, "-tools"), "server", "echo ok");
    expect(await run("-tools/server", { PATH }, dir.path)).toEqual({
      stdout: "ok\n",
      exit: { code: 0, signal: null },
    });
  });

  test("a name is run from the PATH folder the check found it in", async () => {
    using dir = tmpdir();
    mkdirSync(join(dir.path, "bin"));
    script(join(dir.path, "bin"), "-server", "echo ok");
    expect(await run("-server", { PATH: `${join(dir.path, "bin")}:${PATH}` })).toEqual({
      stdout: "ok\n",
      exit: { code: 0, signal: null },
    });
  });
});
