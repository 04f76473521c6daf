import { describe, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// SPEC §13 through the compiled binary and the llama-server stand-in: the conversation is
// processed once — the next turn reuses the slot's prefix, the KV state is saved once the
// server is quiet and restored by a new core, status shows the disk it takes, and the files go
// with their session.
const onPosix = process.platform !== "win32";
type Usage = { prompt_tokens: number; cached_tokens: number };

const kvFiles = (dataDir: string) => {
  try {
    return readdirSync(join(dataDir, "kv")).filter((f) => f.endsWith(".bin") || f.endsWith(".json"));
  } catch {
    return [];
  }
};

describe.skipIf(!onPosix)("prompt reuse through the compiled binary", () => {
  test("turns reuse the prefix; a new core restores the saved state; sessions.delete takes the files", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    let id = 0;
    const chat = async (core: ReturnType<typeof spawnCore>, input: string) => {
      const r = await core.request({ id: ++id, method: "chat", params: { session_id: "s1", input } }, 30_000);
      expect(r.type).toBe("result");
      return r.result.usage as Usage;
    };
    {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const first = await chat(core, "Tell me about the sea and the waves and the tides.");
      expect(first.cached_tokens).toBe(0);
      const second = await chat(core, "And the moon?");
      // Everything before the new message came from the slot (recording 92).
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
      expect(del.result).toEqual({ deleted: true });
      expect(kvFiles(stack.dataDir)).toEqual([]);
      // And no late save brings it back.
      await Bun.sleep(2500);
      expect(kvFiles(stack.dataDir)).toEqual([]);
    }
  }, 60_000);
});
