import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { minShutdownWaitMs } from "../../src/client/shutdown-timing.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { copySecondModel, modelRows } from "../fixtures/several-models.ts";
import { alive, waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { killCoreAndTime, llamaChildren } from "./core-kill.ts";

// Several models' faults from the compiled binary against the stand-in (docs/models.md "Several models", issue
// 28): a busy model's unload, a crash of one model's llama-server, a model that fails to start,
// an unknown or unloaded model's unload.

const words = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ");
const STAND_IN = "llama-stand-in/main.ts";

/** A stack with a second model, `second`, a copy of the default's GGUF. */
function twoModels(dir: string, options: Parameters<typeof writeStack>[1] = {}, entry = "") {
  const stack = writeStack(dir, {
    ...options,
    // After the stack's `memory:` section: an indented line goes in it, as prompt-reuse.test.ts's does.
    extraYaml: `${options.extraYaml ?? ""}\nmodels:\n  - {name: second, path: ./second.gguf, context: 1024${entry}}\n`,
  });
  copySecondModel(dir);
  return stack;
}

describe.skipIf(process.platform === "win32")("several models' faults (compiled core)", () => {
  test("an unload while a chat streams is refused model_busy; force ends the chat cancelled and unloads", async () => {
    await using dir = tmpdir();
    const stack = twoModels(dir.path, { script: [{ content: words, chunk_delay_ms: 50, hang: true }] });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "c", method: "chat", params: { input: "talk", model: "second" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "c" && m.event === "llm_chunk"), 20_000);
    const pid = (await modelRows(core)).second.pid as number;

    const refused = await core.request({ id: "u1", method: "models.unload", params: { model: "second" } });
    expect(refused).toMatchObject({ type: "error", code: "invalid_request", data: { reason: "model_busy" } });
    expect(core.terminal("c")).toBeUndefined();
    expect(alive(pid)).toBe(true);

    const forced = await core.request(
      { id: "u2", method: "models.unload", params: { model: "second", force: true } },
      20_000,
    );
    expect(forced.result).toEqual({ model: "second", unloaded: true });
    await core.waitFor(() => core.terminal("c") !== undefined, 10_000);
    expect(core.terminal("c")).toMatchObject({ type: "error", code: "cancelled" });
    expect(await waitUntil(() => !alive(pid), 10_000)).toBe(true);
    expect((await modelRows(core)).second.state).toBe("unloaded");
  }, 60_000);

  test("shutdown right behind a models.unload stops within the client's wait: the unload is not waited for first", async () => {
    await using dir = tmpdir();
    // Each model's stop is as slow as it gets: its last save hangs (bounded at 2 s) and its
    // server ignores SIGTERM (the grace, then SIGKILL). Waiting for the unload before the rest's
    // stop put the two one after the other, past the client's wait for an unanswered shutdown.
    const stack = twoModels(dir.path, {
      script: [{ content: "one" }, { content: "two" }],
      knobs: { FAKE_LLAMA_SLOT_SAVE_DELAY_MS: "60000", FAKE_LLAMA_IGNORE_SIGTERM: "1" },
    });
    const config = join(dir.path, "config.yaml");
    writeFileSync(config, readFileSync(config, "utf8").replace("stop_grace_s: 1", "stop_grace_s: 4"));
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    expect((await core.request({ id: 1, method: "chat", params: { input: "hi" } }, 30_000)).type).toBe(
      "result",
    );
    const second = { input: "hi", model: "second" };
    expect((await core.request({ id: 2, method: "chat", params: second }, 30_000)).type).toBe("result");
    const servers = stack.recordedServers();
    expect(servers).toHaveLength(2);
    const t0 = Date.now();
    core.send({ id: "u", method: "models.unload", params: { model: "second" } });
    core.send({ id: "bye", method: "shutdown" });
    expect(await core.exited(30_000)).toBe(0);
    expect(Date.now() - t0).toBeLessThan(minShutdownWaitMs(4000));
    expect(core.terminal("u")).toMatchObject({ type: "result", result: { unloaded: true } });
    expect(core.terminal("bye")).toMatchObject({ type: "result" });
    for (const pid of servers) expect(alive(pid)).toBe(false);
  }, 40_000);

  test("models.unload of an unknown model is model_not_found; of an unloaded one, unloaded: false", async () => {
    await using dir = tmpdir();
    const stack = twoModels(dir.path);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const unknown = await core.request({ id: 1, method: "models.unload", params: { model: "nope" } });
    expect(unknown).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "model_not_found" },
    });
    expect(unknown.data.available).toEqual(expect.arrayContaining(["default", "second"]));
    const idle = await core.request({ id: 2, method: "models.unload", params: { model: "second" } });
    expect(idle.result).toEqual({ model: "second", unloaded: false });
    expect((await modelRows(core)).second.state).toBe("unloaded");
  }, 30_000);

  test("a crash of one model's llama-server leaves the other's chat streaming; its next chat restarts it", async () => {
    await using dir = tmpdir();
    const some = words.split(" ").slice(0, 60).join(" ");
    const stack = twoModels(dir.path, { script: [{ content: some, chunk_delay_ms: 25 }] });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    expect(
      (await core.request({ id: "l", method: "models.load", params: { model: "second" } }, 20_000)).result,
    ).toMatchObject({ model: "second", state: "ready" });
    core.send({ id: "c", method: "chat", params: { input: "talk" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "c" && m.event === "llm_chunk"), 20_000);
    const before = await modelRows(core);
    const crashed = before.second.pid as number;
    process.kill(crashed, "SIGKILL");

    await core.waitFor(() => core.terminal("c") !== undefined, 20_000);
    expect(core.terminal("c")).toMatchObject({
      type: "result",
      result: { response: some, model: "default" },
    });
    const after = await modelRows(core);
    expect(after.default.pid).toBe(before.default.pid);
    expect(alive(before.default.pid)).toBe(true);

    const again = await core.request(
      { id: "c2", method: "chat", params: { input: "hi", model: "second" } },
      30_000,
    );
    expect(again).toMatchObject({ type: "result", result: { response: some, model: "second" } });
    const now = (await modelRows(core)).second;
    expect(now.state).toBe("ready");
    expect(now.pid).not.toBe(crashed);
    expect(alive(now.pid)).toBe(true);
  }, 60_000);

  for (const [what, setup] of [
    ["a file that is no GGUF", (dir: string) => writeFileSync(join(dir, "second.gguf"), "not a model")],
    ["extra_args llama-server refuses", () => {}],
  ] as const) {
    test(`a model that fails to start (${what}): its chat gets one error, status says failed, the other serves`, async () => {
      await using dir = tmpdir();
      const refused = what.startsWith("extra") ? ", extra_args: [--no-such-flag]" : "";
      const stack = twoModels(dir.path, { script: [] }, refused);
      setup(dir.path);
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const failed = await core.request(
        { id: "c1", method: "chat", params: { input: "hi", model: "second" } },
        30_000,
      );
      expect(failed.type).toBe("error");
      expect(core.messages.filter((m) => m.id === "c1" && m.type !== "event")).toHaveLength(1);
      expect((await modelRows(core)).second.state).toBe("failed");
      const ok = await core.request({ id: "c2", method: "chat", params: { input: "hello" } }, 30_000);
      expect(ok).toMatchObject({ type: "result", result: { model: "default", response: "You said: hello" } });
      const status = await modelRows(core);
      expect(status.second.state).toBe("failed");
      expect(status.default.state).toBe("ready");
    }, 60_000);
  }

  test("SIGKILL of the core with two models loaded leaves no llama-server (child mode)", async () => {
    await using dir = tmpdir();
    const stack = twoModels(dir.path);
    const core = spawnCore({ cwd: dir.path, env: stack.env });
    for (const model of ["default", "second"])
      expect((await core.request({ id: model, method: "models.load", params: { model } }, 20_000)).type).toBe(
        "result",
      );
    const servers = llamaChildren(core, STAND_IN);
    expect(servers).toHaveLength(2);
    try {
      expect(await killCoreAndTime(core, servers, 2000)).not.toBeNull();
    } finally {
      for (const pid of servers) if (alive(pid)) process.kill(pid, "SIGKILL");
    }
  }, 30_000);
});
