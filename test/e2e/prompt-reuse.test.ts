import { describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { copySecondModel, slotRestores } from "../fixtures/several-models.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// docs/agent.md#prompt-reuse through the compiled binary and the llama-server stand-in: the
// conversation is processed once — the next turn reuses the slot's prefix, the KV state is saved
// once the server is quiet and restored by a new core, status shows the disk it takes, and the
// files go with their session.
const onPosix = process.platform !== "win32";
type Usage = { prompt_tokens: number; cached_tokens: number };

/** The session's sidecar (one session per test). */
const sidecar = (dataDir: string) => {
  const f = kvFiles(dataDir).find((n) => n.endsWith(".json"));
  return f
    ? (JSON.parse(readFileSync(join(dataDir, "kv", f), "utf8")) as { fingerprint: string })
    : undefined;
};

const kvFiles = (dataDir: string) => {
  try {
    return readdirSync(join(dataDir, "kv")).filter((f) => f.endsWith(".bin") || f.endsWith(".json"));
  } catch {
    return [];
  }
};

/** A chat in `session` that must end with a result: its usage. */
const chatIn = (session: string) => {
  let id = 0;
  return async (core: ReturnType<typeof spawnCore>, input: string) => {
    const r = await core.request(
      { id: `${session}-${++id}`, method: "chat", params: { session_id: session, input } },
      30_000,
    );
    expect(r.type).toBe("result");
    return r.result.usage as Usage;
  };
};

/**
 * A session's state saved by one core, then a flipped bit in its file's cell count (transcripts/93f):
 * the stand-in, asked to restore it, dies as the real one is ended by the OOM killer.
 */
async function savedWith93f(
  cwd: string,
  stack: ReturnType<typeof writeStack>,
  chat: ReturnType<typeof chatIn>,
) {
  {
    await using core = spawnCore({ cwd, env: stack.env });
    await chat(core, "Tell me about the sea and the waves and the tides.");
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
  }
  const bin = join(stack.dataDir, "kv", kvFiles(stack.dataDir).find((f) => f.endsWith(".bin")) as string);
  const text = readFileSync(bin, "utf8");
  writeFileSync(bin, text.replace(/"cells":\d+/, '"cells":2147483671').slice(0, text.length));
}

describe.skipIf(!onPosix)("prompt reuse through the compiled binary", () => {
  test("turns reuse the prefix; a new core restores the saved state; sessions.delete takes the files", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    let id = 0;
    const chat = chatIn("s1");
    {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const first = await chat(core, "Tell me about the sea and the waves and the tides.");
      expect(first.cached_tokens).toBe(0);
      const second = await chat(core, "And the moon?");
      // Everything before the new message came from the slot (transcripts/92).
      expect(second.cached_tokens).toBeGreaterThan(first.prompt_tokens);
      // Saved once the server is quiet (2 s), owner-only.
      expect(await waitUntil(() => kvFiles(stack.dataDir).length === 2, 10_000)).toBe(true);
      for (const f of kvFiles(stack.dataDir))
        expect(statSync(join(stack.dataDir, "kv", f)).mode & 0o777).toBe(0o600);
      const status = await core.request({ id: ++id, method: "status" });
      expect(status.result.kv_disk.files).toBe(1);
      expect(status.result.kv_disk.used_bytes).toBeGreaterThan(0);
      expect(status.result.kv_disk.budget_bytes).toBe(4 * 2 ** 30);
      expect(status.result.llama.cache_ram_bytes).toBeGreaterThan(0);
      await core.request({ id: ++id, method: "shutdown" });
      expect(await core.exited(10_000)).toBe(0);
    }
    {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const after = await chat(core, "What else?");
      // A new core, a new llama-server: the state came back from disk.
      expect(after.cached_tokens / after.prompt_tokens).toBeGreaterThan(0.8);
      const del = await core.request({ id: ++id, method: "sessions.delete", params: { session_id: "s1" } });
      expect(del.result).toEqual({ deleted: true, set_aside_copies: [] });
      expect(kvFiles(stack.dataDir)).toEqual([]);
      // And no late save brings it back.
      await Bun.sleep(2500);
      expect(kvFiles(stack.dataDir)).toEqual([]);
    }
  }, 60_000);

  test("llama.kv_disk_bytes 0: nothing saved, yet sessions.delete empties the session's slot (slot actions need a slot folder, 93e)", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      llama: ["kv_disk_bytes: 0"],
      script: [{ content: "noted" }],
    });
    await using core = spawnCore({ cwd: dir.path, env: { ...stack.env, LOCAL_AI_LOG_LEVEL: "debug" } });
    const chat = await core.request({
      id: "c",
      method: "chat",
      params: { session_id: "gone", input: "a secret" },
    });
    expect(chat.type).toBe("result");
    const del = await core.request({ id: "d", method: "sessions.delete", params: { session_id: "gone" } });
    expect(del.result).toMatchObject({ deleted: true });
    await Bun.sleep(500);
    expect((await core.request({ id: "s", method: "shutdown" })).type).toBe("result");
    expect(await core.exited()).toBe(0);
    // Without the folder llama-server answered the erase 501 and the slot kept the session's tokens.
    expect(core.stderr).not.toContain("was not emptied");
    expect(kvFiles(stack.dataDir)).toEqual([]);
  }, 30_000);

  test("a turn right before shutdown is saved by the shutdown, and the next core restores it", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    let id = 0;
    const chat = chatIn("s1");
    let second: Usage;
    {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      await chat(core, "Tell me about the sea and the waves and the tides.");
      second = await chat(core, "And the moon, which pulls the tides twice a day?");
      // At once: no quiet save (2 s) has had its turn; the stop's own save keeps the state.
      await core.request({ id: ++id, method: "shutdown" });
      expect(await core.exited(10_000)).toBe(0);
    }
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const after = await chat(core, "What else?");
    // The prefix through the second turn came back from disk, not only the first turn's.
    expect(after.cached_tokens).toBeGreaterThan(second.prompt_tokens);
  }, 60_000);

  test("a file of another model of the same shape (93d), or of another context size, is dropped, not restored", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    const config = join(dir.path, "config.yaml");
    const first = readFileSync(config, "utf8");
    let id = 0;
    const turn = async (input: string) => {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const r = await core.request({ id: ++id, method: "chat", params: { session_id: "s", input } }, 30_000);
      expect(r.type).toBe("result");
      await core.request({ id: ++id, method: "shutdown" });
      await core.exited(10_000);
      return r.result.usage as Usage;
    };
    await turn("Tell me about the sea and the waves and the tides.");
    const saved = sidecar(stack.dataDir)?.fingerprint;
    expect(saved).toBeDefined();
    // The same bytes under another file: the stand-in would restore it (93d); the core must not.
    const model = /path: (\S+\.gguf)/.exec(first)?.[1] as string;
    copyFileSync(model, join(dir.path, "other.gguf"));
    writeFileSync(config, first.replace(model, join(dir.path, "other.gguf")));
    const other = await turn("And the moon?");
    expect(slotRestores(stack.dataDir)).toBe(0);
    expect(other.cached_tokens).toBe(0);
    const second = sidecar(stack.dataDir)?.fingerprint;
    expect(second).not.toBe(saved);
    // Another context per slot: dropped as well.
    writeFileSync(config, first.replace("context: 2048", "context: 1024"));
    await turn("And the stars?");
    expect(slotRestores(stack.dataDir)).toBe(0);
    expect(sidecar(stack.dataDir)?.fingerprint).not.toBe(second);
  }, 60_000);

  test("a models entry's own extra_args changed: its session's file is dropped, as for llama.extra_args", async () => {
    // Seen with the real server: `--rope-freq-base` in an entry's extra_args changed between two
    // cores, and the slot computed under the old one was restored (agent/kv/fingerprint.ts).
    await using dir = tmpdir();
    const entry = (args: string) =>
      `  - {name: second, path: ./second.gguf, context: 1024, extra_args: [${args}]}`;
    const stack = writeStack(dir.path, {
      tools: [],
      extraYaml: ["  top_k: 0", "models:", entry("")].join("\n"),
    });
    copySecondModel(dir.path);
    const config = join(dir.path, "config.yaml");
    const turn = async (input: string) => {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const r = await core.request(
        { id: input, method: "chat", params: { session_id: "s", model: "second", input } },
        30_000,
      );
      expect(r.type).toBe("result");
      await core.request({ id: "stop", method: "shutdown" });
      await core.exited(10_000);
      return r.result.usage as Usage;
    };
    await turn("Tell me about the sea and the waves and the tides.");
    // Unchanged, it is restored.
    expect((await turn("And the moon?")).cached_tokens).toBeGreaterThan(0);
    writeFileSync(
      config,
      readFileSync(config, "utf8").replace(entry(""), entry('"--rope-freq-base", "20000"')),
    );
    expect((await turn("And the stars?")).cached_tokens).toBe(0);
  }, 60_000);

  test("llama-server killed mid-save: the last whole file stays and is restored by the restart", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      extraYaml: "  top_k: 0",
      knobs: { FAKE_LLAMA_SLOT_SAVE_DELAY_MS: "2000" },
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    let id = 0;
    const chat = async (input: string) => {
      const r = await core.request({ id: ++id, method: "chat", params: { session_id: "s", input } }, 30_000);
      expect(r.type).toBe("result");
      return r.result.usage as Usage;
    };
    await chat("Tell me about the sea and the waves and the tides.");
    // Quiet (2 s), then a save of 2 s.
    expect(await waitUntil(() => kvFiles(stack.dataDir).length === 2, 10_000)).toBe(true);
    const whole = readFileSync(join(stack.dataDir, "kv", kvFiles(stack.dataDir)[0] as string));
    await chat("And the moon?");
    const pid = (await core.request({ id: ++id, method: "status" })).result.llama.pid as number;
    // The next save is half written when the server dies.
    expect(
      await waitUntil(() => readdirSync(join(stack.dataDir, "kv")).some((f) => f.endsWith(".tmp")), 10_000),
    ).toBe(true);
    process.kill(pid, "SIGKILL");
    await Bun.sleep(300);
    expect(readFileSync(join(stack.dataDir, "kv", kvFiles(stack.dataDir)[0] as string))).toEqual(whole);
    const after = await chat("And the stars?");
    // Restarted, and the first turn's state came back from the file the kill left alone.
    expect(slotRestores(stack.dataDir)).toBe(1);
    expect(after.cached_tokens).toBeGreaterThan(0);
  }, 60_000);

  test("a saved file whose restore kills llama-server (93f): the turn goes on on the restarted server, the file dropped", async () => {
    // A flipped bit in the file's cell count: llama-server reserves that many cells before it
    // reads them and is ended by the OOM killer. Kept, the file did that at each of the session's
    // turns, and three of them spent the restart budget of every session. The turn that met it
    // has sent nothing yet: it waits for the restart (with progress) and processes its prompt.
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const chat = chatIn("s1");
    await savedWith93f(dir.path, stack, chat);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const hit = await chat(core, "And the moon?");
    expect(hit.cached_tokens).toBe(0);
    expect(slotRestores(stack.dataDir)).toBe(1);
    expect(kvFiles(stack.dataDir).filter((f) => f.endsWith(".bin"))).toEqual([]);
    const status = (await core.request({ id: "status", method: "status" })).result.llama;
    expect(status.restarts.used).toBe(1);
    const phases = core.messages.filter((m) => m.id === "s1-2" && m.event === "warmup_progress");
    expect(phases.map((m) => m.phase)).toContain("restarting");
    for (const input of ["And the stars?", "And the tides?", "And the wind?", "And the rain?"])
      await chat(core, input);
    await chatIn("s2")(core, "Another session.");
    expect(slotRestores(stack.dataDir)).toBe(1);
  }, 60_000);

  test("a restore that kills llama-server with the restart budget spent: the turn fails as a failed start does, the file dropped", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], llama: ["max_restarts: 0"] });
    await savedWith93f(dir.path, stack, chatIn("s1"));
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const hit = await core.request(
      { id: "hit", method: "chat", params: { session_id: "s1", input: "And the moon?" } },
      30_000,
    );
    expect(hit.type).toBe("error");
    // The error of a start refused over the budget, as the next chat would have met.
    expect(hit.message).toContain("not restarting");
    expect(slotRestores(stack.dataDir)).toBe(1);
    expect(kvFiles(stack.dataDir).filter((f) => f.endsWith(".bin"))).toEqual([]);
  }, 60_000);

  test("two cores on one data folder and KV folder: each turn is served, the second core restores the first's save", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    await using a = spawnCore({ cwd: dir.path, env: stack.env });
    await using b = spawnCore({ cwd: dir.path, env: stack.env });
    let id = 0;
    const chat = async (core: ReturnType<typeof spawnCore>, input: string) => {
      const r = await core.request({ id: ++id, method: "chat", params: { session_id: "s", input } }, 30_000);
      expect(r.type).toBe("result");
      return r.result.usage as Usage;
    };
    await chat(a, "Tell me about the sea and the waves and the tides.");
    expect(await waitUntil(() => kvFiles(stack.dataDir).length === 2, 10_000)).toBe(true);
    const fromB = await chat(b, "And the moon?");
    expect(fromB.cached_tokens / fromB.prompt_tokens).toBeGreaterThan(0.5);
    // Both write the same files, whole: each reads back an old one or a new one, never half.
    await chat(a, "And the stars?");
    await chat(b, "And the sun?");
    expect(await waitUntil(() => kvFiles(stack.dataDir).length === 2, 10_000)).toBe(true);
    expect(readdirSync(join(stack.dataDir, "kv")).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  }, 60_000);

  test("a regular file at data_dir/kv: the core survives the failed background save and keeps answering", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    mkdirSync(stack.dataDir, { recursive: true });
    writeFileSync(join(stack.dataDir, "kv"), "not a folder");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    let id = 0;
    const chat = async (input: string) => {
      const r = await core.request({ id: ++id, method: "chat", params: { session_id: "s1", input } }, 30_000);
      expect(r.type).toBe("result");
    };
    await chat("Tell me about the sea.");
    await chat("And the moon?");
    // The quiet save (2 s) is tried and fails: the core stays up.
    await Bun.sleep(3000);
    expect((await core.request({ id: ++id, method: "ping" })).result).toEqual({ status: "ok" });
    await chat("And the sun?");
    await Bun.sleep(3000);
    expect((await core.request({ id: ++id, method: "ping" })).result).toEqual({ status: "ok" });
    expect(readFileSync(join(stack.dataDir, "kv"), "utf8")).toBe("not a folder");
    await core.request({ id: ++id, method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
  }, 60_000);
});
