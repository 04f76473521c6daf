import { describe, expect, spyOn, test } from "bun:test";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as configLoad from "../../src/config/load.ts";
import { defaultPlanDeps, modelMemo, probeAhead } from "../../src/models/local-plan-deps.ts";
import type { LlamaProvider } from "../../src/runtime/endpoint.ts";
import { CoreServices } from "../../src/server/services.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

function stubLlama(slots: number, stopped: string[]): LlamaProvider {
  return {
    acquire: () => Promise.reject(new Error("not in this test")),
    slots: () => slots,
    stop: async () => {
      stopped.push("llama");
    },
  };
}

describe("the composition root", () => {
  test("services are created on first use and stopped once: MCP servers from the start, beside the rest", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "llama:\n  parallel: 3\n");
    const stopped: string[] = [];
    let made = 0;
    const services = new CoreServices({
      configPath: "config.yaml",
      cwd: dir.path,
      llama: () => {
        made++;
        return stubLlama(2, stopped);
      },
    });
    // Before the supervisor exists, the config's explicit slot count; then the supervisor's.
    expect(services.parallelChats()).toBe(3);
    const pool = services.mcp();
    const close = pool.close.bind(pool);
    pool.close = async () => {
      stopped.push("mcp");
      await close();
    };
    expect(services.llama()).toBe(services.llama());
    expect(made).toBe(1);
    expect(services.parallelChats()).toBe(2);
    expect(services.sessionLocks()).toBe(services.sessionLocks());
    await Promise.all([services.stop(), services.stop()]);
    // The pool was made first, yet its stop does not wait for llama-server's (shutdown-order.ts).
    expect(stopped).toEqual(["mcp", "llama"]);
  });

  test("the database is closed last, even opened after the prompt reuse that asks it as it stops", async () => {
    // A first chat makes the prompt reuse before it starts llama-server and opens the database
    // only after the spawn (docs/performance.md, "A cold chat's way to the spawn").
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), `app:\n  data_dir: ${JSON.stringify(dir.path)}\n`);
    const stopped: string[] = [];
    const services = new CoreServices({
      configPath: "config.yaml",
      cwd: dir.path,
      llama: () => stubLlama(1, stopped),
    });
    const reuse = services.promptReuse();
    const stopReuse = reuse.stop.bind(reuse);
    reuse.stop = async () => {
      // The last saves ask whether each session is still there to keep.
      stopped.push(`reuse (store open: ${!closed})`);
      await stopReuse();
    };
    let closed = false;
    const store = services.store();
    const close = store.close.bind(store);
    store.close = () => {
      closed = true;
      stopped.push("store");
      close();
    };
    await services.stop();
    expect(stopped).toEqual(["reuse (store open: true)", "llama", "store"]);
  });

  test("outOfMemoryStarts: the model section's server's count once it exists, none for another name", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "llama:\n  parallel: 1\n");
    const stopped: string[] = [];
    const provider = { ...stubLlama(1, stopped), snapshot: () => ({ outOfMemoryStarts: 2 }) as never };
    const services = new CoreServices({ configPath: "config.yaml", cwd: dir.path, llama: () => provider });
    expect(services.outOfMemoryStarts("default")).toBe(0); // no server yet
    services.llama();
    expect(services.outOfMemoryStarts("default")).toBe(2);
    expect(services.outOfMemoryStarts("other")).toBe(0);
    await services.stop();
  });

  test("without a config: parallelChats is one and config() names the problem", () => {
    using dir = tmpdir();
    const services = new CoreServices({ configPath: "none.yaml", cwd: dir.path });
    expect(services.parallelChats()).toBe(1);
    expect(() => services.config()).toThrow(/no config file/);
    expect(services.defaultConfig().file).toBeNull();
  });

  test("prepareForChat reads the model's header ahead, once, and creates no service", async () => {
    using dir = tmpdir();
    const model = writeGguf(dir.path, "ahead.gguf", llama7b());
    writeFileSync(join(dir.path, "config.yaml"), `model:\n  path: ${JSON.stringify(model)}\n`);
    const services = new CoreServices({ configPath: "config.yaml", cwd: dir.path });
    const before = modelMemo.parses;
    services.prepareForChat();
    services.prepareForChat();
    expect(await waitFor(() => modelMemo.parses > before, { timeoutMs: 5000 })).toBe(true);
    await Bun.sleep(20);
    expect(modelMemo.parses).toBe(before + 1);
    // The chat's plan finds it read: no second parse.
    const info = await modelMemo.read(model);
    expect(info.n_layer).toBe(32);
    expect(modelMemo.parses).toBe(before + 1);
    expect(services.existingLlama()).toBeUndefined();
    await services.stop();
  });

  // docs/performance.md, "The binary's device list, probed ahead".
  test("prepareForChat asks llama-server for its devices ahead; the plan takes that answer", async () => {
    using dir = tmpdir();
    const asked = join(dir.path, "asked");
    const binary = join(dir.path, "llama-server");
    writeFileSync(binary, `#!/bin/sh\necho "$@" >> "${asked}"\nprintf 'Available devices:\\n  (none)\\n'\n`);
    chmodSync(binary, 0o755);
    writeFileSync(join(dir.path, "config.yaml"), `llama:\n  binary: ${JSON.stringify(binary)}\n`);
    // The header test's probe ahead (for whatever PATH finds) may still run: one for another
    // binary is not started beside it (plan/probe-ahead.ts), so wait it out. CI's loaded box
    // met it running and this test never saw --list-devices.
    await probeAhead.look(undefined).catch(() => {});
    const services = new CoreServices({ configPath: "config.yaml", cwd: dir.path });
    services.prepareForChat();
    const lines = () => {
      try {
        return readFileSync(asked, "utf8").trim().split("\n");
      } catch {
        return [];
      }
    };
    expect(await waitFor(() => lines().length > 0, { timeoutMs: 5000 })).toBe(true);
    const hw = await defaultPlanDeps.probe(binary);
    expect(hw.probes.find((p) => p.id === "llama-server")?.message).toBe("llama-server lists no GPU device");
    expect(lines()).toEqual(["--list-devices"]);
    // Taken once: the next plan probes again, but a CPU build's `(none)` is remembered in
    // data_dir/cache (plan/listing-memo.ts): the binary is not started for it.
    // Written off the loop (plan/listing-memo-fs.ts): it lands a moment after the answer.
    const memo = join(dir.path, "data", "cache", "list-devices.json");
    expect(await waitFor(() => existsSync(memo), { timeoutMs: 5000 })).toBe(true);
    const again = await defaultPlanDeps.probe(binary);
    expect(again.probes.find((p) => p.id === "llama-server")?.message).toStartWith(
      "llama-server lists no GPU device; remembered from an earlier start",
    );
    expect(lines()).toEqual(["--list-devices"]);
    await services.stop();
    // Stopping: the memo is neither read nor written, and the binary asked as before.
    await defaultPlanDeps.probe(binary);
    expect(lines()).toEqual(["--list-devices", "--list-devices"]);
  });
});

test("a refused config is read again only once it changed: a large one held the loop at each request", () => {
  using dir = tmpdir();
  const file = join(dir.path, "config.yaml");
  // Some 300 KB of empty lists parse in about a second; the schema then refuses max_steps: 0.
  // A tenth of it here: the parses are counted, not timed (the whole size took 34 s on a loaded box).
  writeFileSync(file, `x: [${"[],".repeat(10_000)}[]]\napp:\n  max_steps: 0\n`);
  const services = new CoreServices({ configPath: "config.yaml", cwd: dir.path });
  const first = coreErrorOf(() => services.config());
  expect(first).toMatchObject({ code: "config_invalid", data: { key: "app.max_steps" } });
  // Three parses took some 1.8 s here; the kept refusal, none (counted, not timed).
  const loads = spyOn(configLoad, "loadConfig");
  try {
    for (let i = 0; i < 3; i++) expect(coreErrorOf(() => services.config())).toBe(first);
    expect(loads).not.toHaveBeenCalled();
  } finally {
    loads.mockRestore();
  }
  // Corrected in place to the same size, it is read again and loads.
  writeFileSync(file, `x: [${"[],".repeat(10_000)}[]]\napp:\n  max_steps: 7\n`);
  expect(services.config().app.max_steps).toBe(7);
});
