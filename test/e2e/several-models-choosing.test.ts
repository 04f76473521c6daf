import { describe, expect, test } from "bun:test";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { copySecondModel, modelRows } from "../fixtures/several-models.ts";
import { alive, waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Choosing among several models from the compiled binary against the stand-in (docs/models.md
// "Several models", docs/protocol.md `chat`'s `model`): by name, by path, by the agent; each server's extra_args; doctor and plan per model; one load shared; which model a
// swap unloads (least recently used, never a pinned one); `llama.idle_unload_s`.

const states = async (core: ReturnType<typeof spawnCore>) =>
  Object.fromEntries(Object.entries(await modelRows(core)).map(([name, row]) => [name, row.state]));

/** The flags under test that a llama-server was started with (the stand-in's argv log). */
const flagsOf = (log: string) =>
  readFileSync(log, "utf8")
    .split("\n")
    .filter((a) => a === "--seed" || a === "--mlock");

describe.skipIf(process.platform === "win32")("choosing among several models (compiled core)", () => {
  test("by name, by path, by the agent; each server's extra_args; doctor and plan per model", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const stack = writeStack(dir.path, {
      tools: [],
      knobs: { FAKE_LLAMA_ARGV_LOG: argvLog },
      llama: ["extra_args: [--seed, '7']"],
      extraYaml: "models:\n  - {name: second, path: ./second.gguf, context: 1024, extra_args: [--mlock]}\n",
    });
    copySecondModel(dir.path);
    copyFileSync(join(dir.path, "second.gguf"), join(dir.path, "third.gguf"));
    const config = join(dir.path, "config.yaml");
    writeFileSync(
      config,
      readFileSync(config, "utf8").replace("agents:\n", "agents:\n  - name: writer\n    model: second\n"),
    );
    await using core = spawnCore({ cwd: dir.path, env: stack.env });

    const unknown = await core.request({ id: 1, method: "chat", params: { input: "hi", model: "nope" } });
    expect(unknown).toMatchObject({
      code: "invalid_request",
      data: { field: "model", reason: "model_not_found", available: ["default", "second"] },
    });

    // The writer agent's model; llama.extra_args and the entry's own both reach its server.
    const byAgent = await core.request(
      { id: 2, method: "chat", params: { input: "hi", agent: "writer" } },
      30_000,
    );
    expect(byAgent.result?.model).toBe("second");
    expect(flagsOf(argvLog)).toEqual(["--seed", "--mlock"]);
    // A GGUF the models listing shows, by its path: the result names it as the request gave it.
    const byPath = await core.request(
      { id: 3, method: "chat", params: { input: "hi", model: "./third.gguf" } },
      30_000,
    );
    expect(byPath.result?.model).toBe("./third.gguf");
    expect(flagsOf(argvLog)).toEqual(["--seed"]);
    const rows = await modelRows(core);
    expect(rows[join(dir.path, "third.gguf")]).toMatchObject({ state: "ready", kind: "chat" });
    expect(rows.default.state).toBe("unloaded");
    const listed = (await core.request({ id: 4, method: "models" }, 20_000)).result.models;
    expect(Object.fromEntries(listed.map((m: any) => [m.file, [m.name, m.loaded]]))).toMatchObject({
      "second.gguf": ["second", true],
      "third.gguf": [null, true],
    });
    // The chat's `model` overrides the agent's.
    const overridden = await core.request(
      { id: 5, method: "chat", params: { input: "hi", agent: "writer", model: "default" } },
      30_000,
    );
    expect(overridden.result?.model).toBe("default");
    expect(flagsOf(argvLog)).toEqual(["--seed"]);

    // plan {model} plans it alone, at its own context; doctor checks every configured model.
    const plan = await core.request({ id: 6, method: "plan", params: { model: "second" } });
    expect(plan.result.plan.context_per_slot).toBe(1024);
    const doctor = (await core.request({ id: 7, method: "doctor" }, 30_000)).result;
    const checks = Object.fromEntries(doctor.checks.map((c: any) => [c.id, c]));
    expect(checks["model:second"]).toMatchObject({ status: "ok", data: { model: "second" } });
    expect(checks["plan:second"].data.argv).toEqual(expect.arrayContaining(["--seed", "--mlock"]));
    expect(checks.plan.data.argv).not.toContain("--mlock");
  }, 60_000);

  test("loads of one model at once share one server; llama.idle_unload_s stops it once unused", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: "one" }],
      llama: ["idle_unload_s: 1"],
      extraYaml: "models:\n  - {name: second, path: ./second.gguf, context: 1024}\n",
    });
    copySecondModel(dir.path);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "l1", method: "models.load", params: { model: "second" } });
    core.send({ id: "l2", method: "models.load", params: { model: "second" } });
    core.send({ id: "c", method: "chat", params: { model: "second", input: "hi" } });
    await core.waitFor(() => ["l1", "l2", "c"].every((id) => core.terminal(id)), 30_000);
    for (const id of ["l1", "l2"])
      expect(core.terminal(id)?.result).toMatchObject({ model: "second", state: "ready" });
    expect(core.terminal("c")?.result).toMatchObject({ model: "second", response: "one" });
    expect(stack.recordedServers()).toHaveLength(1);
    const pid = (await modelRows(core)).second.pid as number;
    expect(await waitUntil(() => !alive(pid), 10_000)).toBe(true);
    expect((await modelRows(core)).second).toMatchObject({ state: "unloaded", pid: null });
  }, 60_000);

  test("room is made by unloading the least recently used model; a pinned one is never unloaded", async () => {
    await using dir = tmpdir();
    // Two of the 1024-token models fit (5.1 MB each), not three; `big` (2048: 8.8 MB) fits beside
    // no other.
    const stack = writeStack(dir.path, {
      tools: [],
      llama: ["load_wait_s: 0.5"],
      extraYaml: [
        "hardware: {ram_bytes: 12000000, vram_bytes: 0}",
        "models:",
        "  - {name: second, path: ./second.gguf, context: 1024}",
        "  - {name: third, path: ./second.gguf, context: 1024}",
        "  - {name: big, path: ./second.gguf, context: 2048}",
      ].join("\n"),
    });
    const config = join(dir.path, "config.yaml");
    writeFileSync(config, readFileSync(config, "utf8").replace("  context: 2048\n", "  context: 1024\n"));
    copySecondModel(dir.path);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = async (id: string, model: string) =>
      (await core.request({ id, method: "chat", params: { input: "x", model } }, 30_000)) as any;
    // Used in this order: `second` is the least recently used when `third` needs room.
    for (const [id, model] of [
      ["1", "default"],
      ["2", "second"],
      ["3", "default"],
    ] as const)
      expect((await chat(id, model)).type).toBe("result");
    expect((await chat("4", "third")).type).toBe("result");
    expect(await states(core)).toEqual({
      default: "ready",
      second: "unloaded",
      third: "ready",
      big: "unloaded",
    });

    const pinned = await core.request({
      id: "p",
      method: "models.load",
      params: { model: "default", pin: true },
    });
    expect(pinned.result).toMatchObject({ model: "default", state: "ready" });
    // Unloading `third` would not make room beside the pinned default: it is left loaded.
    const big = await chat("5", "big");
    expect(big).toMatchObject({
      code: "model_plan_error",
      data: { model: "big", holders: ["default"], pinned: ["default"] },
    });
    expect(big.message).toContain("models.unload");
    expect(await states(core)).toMatchObject({ big: "unloaded" });
    expect(await states(core)).toMatchObject({ default: "ready", third: "ready" });
  }, 60_000);
});
