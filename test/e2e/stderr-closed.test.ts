import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, spawnCore } from "../fixtures/core-process.ts";
import { alive, waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A host that closes the read end of the core's stderr (issue 10 item 3): every later log line
// fails with EPIPE. The core must stop logging and keep serving, as it does for a broken stdout.
const onPosix = process.platform !== "win32";

describe.skipIf(!onPosix)("a closed stderr", () => {
  test("serve-stdio keeps answering requests that log, chats included, and exits 0", async () => {
    await using dir = tmpdir();
    // The unknown key makes the config load log a warning, the first write to the closed pipe.
    const stack = writeStack(dir.path, {
      script: [{ content: "first answer" }, { content: "second answer" }],
      extraYaml: "typo_section: {}",
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env, closeStderr: true });
    await Bun.sleep(200); // past the lazy config load and its warning

    // test.fail logs a stack trace; a line that is not JSON is answered without the loop dying.
    const failed = await core.request({ id: "f", method: "test.fail" });
    expect(failed).toMatchObject({ type: "error", code: "internal_error" });
    core.write("{not json\n");
    await core.waitFor((ms) => ms.some((m) => m.id === null && m.code === "invalid_json"));

    // A chat starts llama-server (logged at info) and gets its answer; a second one too.
    const first = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
    expect(first).toMatchObject({ type: "result", result: { response: "first answer" } });
    const servers = stack.recordedServers();
    expect(servers).toHaveLength(1);
    const second = await core.request({ id: 2, method: "chat", params: { input: "again" } });
    expect(second).toMatchObject({ type: "result", result: { response: "second answer" } });
    expect((await core.request({ id: 3, method: "ping" })).result).toEqual({ status: "ok" });

    await core.request({ id: 4, method: "shutdown" });
    expect(await core.exited()).toBe(0);
    expect(await waitUntil(() => !alive(servers[0]!), 2000)).toBe(true);
  }, 30_000);

  test("plan and doctor on the CLI end with their own exit codes and no stack trace", async () => {
    await using dir = tmpdir();
    const bad = join(dir.path, "bad.yaml");
    writeFileSync(bad, "app: { max_steps: -1 }\n");
    const run = async (args: string[]) => {
      const proc = Bun.spawn([ensureBinary(), ...args], {
        cwd: dir.path,
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, LOCAL_AI_LOG_LEVEL: "info" },
      });
      await proc.stderr.cancel();
      const stdout = await new Response(proc.stdout).text();
      return { code: await proc.exited, stdout };
    };
    const plan = await run(["plan", "--config", bad]);
    expect(plan.code).toBe(1);
    expect(plan.stdout).not.toMatch(/EPIPE|\n\s+at /);
    const doctor = await run(["doctor", "--json", "--config", bad]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).not.toMatch(/EPIPE|\n\s+at /);
    const report = JSON.parse(doctor.stdout);
    expect(report.checks.find((c: { id: string }) => c.id === "config")).toMatchObject({ status: "fail" });
    const unknown = await run(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stdout).not.toMatch(/EPIPE|\n\s+at /);
  }, 30_000);
});
