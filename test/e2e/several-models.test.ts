import { describe, expect, test } from "bun:test";
import { copyFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { alive, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// Several models from the compiled binary against the stand-in (docs/models.md "Several models", issue 28
// part 3): a llama-server per model, chats on each, status, unload.

describe.skipIf(process.platform === "win32")("several models (compiled core)", () => {
  test("a chat on each model, two llama-servers at once, status rows, an unload; no child left", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ content: "from one" }, { content: "from two" }],
      extraYaml: "models:\n  - {name: second, path: ./second.gguf, context: 1024}\n",
    });
    const first = readdirSync(dir.path).find((f) => f.endsWith(".gguf")) as string;
    copyFileSync(join(dir.path, first), join(dir.path, "second.gguf"));
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const init = await core.request({ id: 0, method: "initialize" });
    expect(init.result.capabilities.models).toEqual({ multiple: true });

    const a = await core.request({ id: 1, method: "chat", params: { input: "hi" } }, 30_000);
    expect(a.result?.model).toBe("default");
    const b = await core.request({ id: 2, method: "chat", params: { input: "hi", model: "second" } }, 30_000);
    expect(b.result?.model).toBe("second");

    const status = (await core.request({ id: 3, method: "status" })).result;
    const rows = Object.fromEntries(status.models.map((m: any) => [m.name, m]));
    expect(rows.default.state).toBe("ready");
    expect(rows.second.state).toBe("ready");
    const pids = [rows.default.pid, rows.second.pid] as number[];
    expect(new Set(pids).size).toBe(2);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    expect(rows.second.memory_bytes).toBeGreaterThan(0);
    expect(rows.second).toMatchObject({ gpu_layers: expect.any(Number), gpu_out_of_memory: 0 });
    expect(status.memory.length).toBeGreaterThan(0);
    // `llama` is the model section's server, as a host written for one model reads it: with a
    // `models` list it said `stopped`, every field null, while `default` served.
    expect(status.llama).toMatchObject({ state: "ready", pid: rows.default.pid, context_per_slot: 2048 });
    expect(status.llama.model.path).toBe(rows.default.path);
    // Each model's own pid record and log under data_dir.
    expect(readdirSync(join(stack.dataDir, "run")).filter((f) => f.startsWith("llama-server-"))).toHaveLength(
      2,
    );
    expect(readdirSync(join(stack.dataDir, "logs"))).toEqual(
      expect.arrayContaining(["llama-server.log", "llama-server-second.log"]),
    );

    // The host's model picker: each file beside the config by its configured name, marked loaded
    // from what this core serves (docs/protocol.md#models).
    const listed = async (id: string) => {
      const res = (await core.request({ id, method: "models" }, 20_000)).result;
      return Object.fromEntries(res.models.map((m: any) => [m.file, [m.name, m.loaded]]));
    };
    expect(await listed("m1")).toEqual({ [first]: ["default", true], "second.gguf": ["second", true] });

    const un = await core.request({ id: 4, method: "models.unload", params: { model: "second" } }, 20_000);
    expect(un.result).toEqual({ model: "second", unloaded: true });
    await waitFor(() => !alive(pids[1] as number), { timeoutMs: 10_000 });
    expect(alive(pids[0] as number)).toBe(true);
    expect(await listed("m2")).toEqual({ [first]: ["default", true], "second.gguf": ["second", false] });

    // models.load brings it back ahead of any chat, with warmup_progress, pinned as asked (docs/protocol.md#modelsload).
    const load = await core.request(
      { id: 5, method: "models.load", params: { model: "second", pin: true } },
      20_000,
    );
    expect(load.result).toMatchObject({
      model: "second",
      state: "ready",
      memory_bytes: rows.second.memory_bytes,
    });
    const phases = core.messages
      .filter((m: any) => m.id === 5 && m.event === "warmup_progress")
      .map((m: any) => m.phase);
    expect(phases[0]).toBe("starting");
    expect(phases.at(-1)).toBe("ready");
    const reloaded = (await core.request({ id: 6, method: "status" })).result.models.find(
      (m: any) => m.name === "second",
    );
    expect(reloaded).toMatchObject({ state: "ready", pinned: true });
    pids.push(reloaded.pid);

    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 60_000);
});
