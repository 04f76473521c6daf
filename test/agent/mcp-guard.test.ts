import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
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

  test.skipIf(!existsSync("/proc/self/task"))(
    "the config's DYLD_* reach the server without passing through the guard's shell's environment",
    async () => {
      using dir = tmpdir();
      const shellEnv = join(dir.path, "shell-env");
      // macOS strips every DYLD_* from a SIP-protected binary's environment as it starts, /bin/sh
      // included, so a server the guard exec'd lost the DYLD_LIBRARY_PATH its config's `env` set.
      // The guard's watcher is a fork of the shell: its environment is the one the shell got.
      const body = `for k in $(cat /proc/$$/task/$$/children); do tr '\\0' '\\n' < /proc/$k/environ; done > '${shellEnv}'
printf '%s|%s|%s' "$DYLD_LIBRARY_PATH" "$DYLD_INSERT_LIBRARIES" "$OTHER"`;
      const path = script(dir.path, "server", body);
      const env = { PATH, DYLD_LIBRARY_PATH: "/opt/my lib", DYLD_INSERT_LIBRARIES: "a'b", OTHER: "x" };
      expect(await run(path, env)).toEqual({
        stdout: "/opt/my lib|a'b|x",
        exit: { code: 0, signal: null },
      });
      const seen = readFileSync(shellEnv, "utf8");
      expect(seen).toContain("OTHER=x");
      expect(seen).not.toContain("DYLD_");
    },
  );
});

describe.skipIf(process.platform === "win32")("the MCP guard's shell variables", () => {
  test("a config env variable the guard's shell also uses reaches the server as the config set it", async () => {
    using dir = tmpdir();
    // The DYLD_* hand-over counted its arguments in a shell variable `n` of the shell that then
    // exec's the server, so a config's `env: { n: … }` (exported) reached the server as "0".
    const path = script(dir.path, "server", `printf '%s|%s' "$n" "$DYLD_X"`);
    for (const dyld of ["", "d"]) {
      expect(await run(path, { PATH, n: "keep", ...(dyld ? { DYLD_X: dyld } : {}) })).toEqual({
        stdout: `keep|${dyld}`,
        exit: { code: 0, signal: null },
      });
    }
  });
});

describe.skipIf(process.platform === "win32")("an MCP server on Windows", () => {
  test("unguarded (Windows) the server joins the core's Job Object; guarded it does not", async () => {
    using dir = tmpdir();
    const path = script(dir.path, "server", 'echo "$$"');
    const joined: number[] = [];
    const join = (pid: number) => joined.push(pid) > 0;
    const direct = spawnMcpServer({ command: path, args: [], env: { PATH } }, false, join);
    const pid = Number((await new Response(direct.stdout).text()).trim());
    await direct.exited;
    expect(joined).toEqual([pid]);
    const guarded = spawnMcpServer({ command: path, args: [], env: { PATH } }, true, join);
    await guarded.exited;
    expect(joined).toEqual([pid]);
  });
});

// The guard's watcher keeps the `pid:start` lines the core tells it (src/agent/mcp/guard.ts): kept
// whole, a server that went on starting short-lived processes outside its group grew that list for
// as long as it ran, each line copying the whole list in the shell. Its list, as the watcher runs
// it, holds the processes still running as noted, and a bounded number of others.
describe.skipIf(!existsSync("/proc/self/stat"))("the MCP guard's list of escaped processes", () => {
  test("5,000 lines of processes gone leave a list of the ones still running", async () => {
    const { GUARD_KEEP } = await import("../../src/agent/mcp/guard.ts");
    const stat = readFileSync("/proc/self/stat", "utf8");
    const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    const live = `${process.pid}:${start}`;
    const feed = `${GUARD_KEEP}
add ${live}
i=0; while [ $i -lt 5000 ]; do add "$((4000000+i)):1"; i=$((i+1)); done
set -- $out; echo "$# $cap"; case " $out " in *" ${live} "*) echo kept;; esac`;
    const child = Bun.spawnSync(["/bin/sh", "-c", feed], { stderr: "ignore" });
    const [counts, kept] = child.stdout.toString().trim().split("\n");
    const [count, cap] = (counts as string).split(" ").map(Number);
    expect(kept).toBe("kept");
    expect(count).toBeLessThanOrEqual(256);
    expect(cap).toBe(256);
  });
});
