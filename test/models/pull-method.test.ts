import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { incompletePath } from "../../src/models/hf-cache.ts";
import { DownloadProgressFields, PullResultSchema } from "../../src/protocol/pull.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { type HubStandIn, startHubStandIn } from "../fixtures/hub-stand-in.ts";
import { killQuietly } from "../fixtures/kill-quietly.ts";
import { writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { lineWritten, waitFor } from "../fixtures/wait.ts";

// The pull method through the real stdio loop (dispatcher, writer), against the hub stand-in.

const dir = tmpdir("local-ai-pull-method-");
const cache = join(dir.path, "hub");
const gguf = new Uint8Array(readFileSync(writeFakeModel(dir.path, "tiny.gguf")));
const big = new Uint8Array(4 * 1024 * 1024).fill(9);
let hub: HubStandIn;
const saved = { ...process.env };

beforeAll(async () => {
  hub = await startHubStandIn([
    {
      id: "org/tiny-GGUF",
      files: [
        { path: "tiny-Q4_K_M.gguf", content: gguf },
        { path: "big-Q8_0.gguf", content: big },
      ],
    },
  ]);
  // The method reads the environment as the core does (HF_ENDPOINT, HF_HUB_CACHE).
  process.env.HF_ENDPOINT = hub.url;
  process.env.HF_HUB_CACHE = cache;
});

afterAll(async () => {
  for (const key of ["HF_ENDPOINT", "HF_HUB_CACHE"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  await hub.close();
  dir[Symbol.dispose]();
});

describe("the pull method", () => {
  test("initialize lists pull and download_progress", async () => {
    const h = startHarness();
    const init = await h.request({ id: 0, method: "initialize", params: { protocol_versions: [1] } });
    expect(init.result.capabilities.methods).toContain("pull");
    expect(init.result.capabilities.events).toContain("download_progress");
    h.end();
    await h.exit;
  });

  test("streams download_progress events and answers the path, sha256 and the plan's verdict", async () => {
    const h = startHarness();
    const r = await h.request(
      { id: "p", method: "pull", params: { repo: "org/tiny-GGUF", quant: "q4_k_m" } },
      30_000,
    );
    expect(r.type).toBe("result");
    expect(() => PullResultSchema.parse(r.result)).not.toThrow();
    expect(r.result).toMatchObject({
      repo: "org/tiny-GGUF",
      revision: "main",
      commit: hub.commitOf("org/tiny-GGUF"),
      size_bytes: gguf.length,
      sha256: hub.sha256Of("org/tiny-GGUF", "tiny-Q4_K_M.gguf"),
      cache_dir: cache,
    });
    expect(r.result.path.startsWith(join(cache, "models--org--tiny-GGUF", "snapshots"))).toBe(true);
    // No config file here: the verdict uses the default settings, for this machine.
    expect(r.result.fit.fits).toBe(true);
    expect(r.result.fit.message).toStartWith("fits:");
    const events = h.messages.filter((m) => m.id === "p" && m.type === "event");
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) {
      expect(e.event).toBe("download_progress");
      const { id: _id, type: _type, event: _event, ...fields } = e;
      expect(() => DownloadProgressFields.parse(fields)).not.toThrow();
    }
    expect(events.at(-1)).toMatchObject({ bytes_done: gguf.length, total: gguf.length });
    h.end();
    await h.exit;
  });

  test("a pull cancelled while its module loads asks the hub nothing", async () => {
    const h = startHarness();
    // `cancel` loaded first, so it runs as it is read, while the pull's module is still loading.
    await h.request({ id: "c0", method: "cancel", params: { request_id: "none" } });
    const seen = hub.requests.length;
    h.sendRaw(
      '{"id":"p","method":"pull","params":{"repo":"org/tiny-GGUF","quant":"q4_k_m"}}\n{"id":"c","method":"cancel","params":{"request_id":"p"}}\n',
    );
    await h.waitFor(() => h.terminal("p") !== undefined, 10_000);
    expect(h.terminal("c")?.result).toEqual({ cancelled: true });
    expect(h.messages.filter((m) => m.id === "p")).toEqual([h.terminal("p")!]);
    expect(h.terminal("p")).toMatchObject({ type: "error", code: "cancelled" });
    h.end();
    await h.exit;
    expect(hub.requests.slice(seen)).toEqual([]);
  });

  test("cancel stops a pull by its request id: cancelled, the partial kept", async () => {
    hub.knobs.bytesPerSecond = 1024 * 1024;
    try {
      const h = startHarness();
      h.send({ id: "slow", method: "pull", params: { repo: "org/tiny-GGUF", file: "big-Q8_0.gguf" } });
      const partial = incompletePath(cache, "org/tiny-GGUF", hub.sha256Of("org/tiny-GGUF", "big-Q8_0.gguf"));
      await h.waitFor(() => existsSync(partial) && statSync(partial).size > 100_000, 10_000);
      const c = await h.request({ id: "c", method: "cancel", params: { request_id: "slow" } });
      expect(c.result).toEqual({ cancelled: true });
      await h.waitFor(() => h.terminal("slow") !== undefined, 10_000);
      expect(h.terminal("slow")).toMatchObject({ type: "error", code: "cancelled" });
      expect(statSync(partial).size).toBeGreaterThan(100_000);
      h.end();
      await h.exit;
    } finally {
      hub.knobs.bytesPerSecond = undefined;
    }
  });

  test("a cancel while the verdict's probe runs is answered at once, not once the probe gives up", async () => {
    // The fit check's llama-server --list-devices never answers (it is waited on up to 5 s).
    const pids = join(dir.path, "fit-pids");
    const hung = join(dir.path, "hung-llama-server");
    writeFileSync(hung, `#!/bin/sh\necho $$ >> "${pids}"\nexec sleep 60\n`, { mode: 0o755 });
    const config = join(dir.path, "hung.yaml");
    writeFileSync(config, `llama:\n  binary: ${hung}\nmodel:\n  path: m.gguf\n`);
    const h = startHarness({ configPath: config, cwd: dir.path });
    h.send({ id: "p", method: "pull", params: { repo: "org/tiny-GGUF", quant: "q4_k_m" } });
    expect(await waitFor(() => lineWritten(pids), { timeoutMs: 20_000 })).toBe(true);
    const c = await h.request({ id: "c", method: "cancel", params: { request_id: "p" } });
    expect(c.result).toEqual({ cancelled: true });
    await h.waitFor(() => h.terminal("p") !== undefined, 10_000);
    expect(h.terminal("p")).toMatchObject({ type: "error", code: "cancelled" });
    // Answered while the probe still runs: the answer used to wait for its timeout, which kills it.
    const pid = Number(readFileSync(pids, "utf8").trim().split("\n")[0]);
    expect(isAlive(pid)).toBe(true);
    killQuietly(pid);
    h.end();
    await h.exit;
  }, 30_000);

  test("bad params are invalid_request naming the field", async () => {
    const h = startHarness();
    const cases: [unknown, string][] = [
      [{ repo: "no-slash" }, "repo"],
      [{ repo: "org/m", quant: "Q4_K_M", file: "m.gguf" }, "file"],
      [{ repo: "org/m", file: "../etc/passwd.gguf" }, "file"],
      [{ repo: "org/m", file: "model.bin" }, "file"],
      [{ repo: "org/m", quant: "m.gguf" }, "quant"],
      [{ repo: "org/m", revision: "../../x" }, "revision"],
    ];
    for (const [i, [params, field]] of cases.entries()) {
      const r = await h.request({ id: i, method: "pull", params });
      expect(r).toMatchObject({ type: "error", code: "invalid_request" });
      expect(r.message).toContain(field);
    }
    h.end();
    await h.exit;
  });

  test("hub failures come back as errors naming repo, file and cause", async () => {
    const h = startHarness();
    const r = await h.request({ id: 1, method: "pull", params: { repo: "org/tiny-GGUF", quant: "IQ1_S" } });
    expect(r).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { repo: "org/tiny-GGUF", cause: "not_found" },
    });
    expect(r.message).toContain("tiny-Q4_K_M.gguf");
    h.end();
    await h.exit;
  });
});
