import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { decideFit } from "../../src/runtime/memory-fit.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { testPlan } from "../runtime/helpers/harness.ts";

// Two chat models of several on one RPC worker (docs/distributed.md, docs/supervisor.md "Scheduling
// several models"). ggml-rpc-server serves one client at a time (its accept loop serves a client
// to the end before the next), so a second llama-server listing a worker the first holds waits on
// its HELLO until the start-up timeout. A model whose plan uses a worker therefore holds all of
// its devices, however few layers it put there: the second is admitted only once the first is gone.

const GIB = 1024 ** 3;
const W = "10.0.0.2:50052";

function runtimeOf(dir: string, name: string, layersGiB: number) {
  const config = ConfigSchema.parse({
    app: { data_dir: join(dir, "data") },
    llama: { binary: "/nonexistent/llama-server", rpc: [W] },
    model: { path: join(dir, "m.gguf") },
    models: [
      { name: "a", path: join(dir, "a.gguf") },
      { name: "b", path: join(dir, "b.gguf") },
    ],
  });
  const devices = [
    { id: "cpu", kind: "cpu", usage: { total: 1 * GIB }, budget_bytes: 16 * GIB },
    { id: "rpc0", kind: "rpc", endpoint: W, usage: { total: layersGiB * GIB }, budget_bytes: 20 * GIB },
  ] as unknown as DevicePlan[];
  return makeModelRuntime(name, {
    config: () => config,
    heldByOthers: () => [],
    reuse: () => ({}) as PromptReuse,
    plan: async () => ({ plan: { devices }, launch: testPlan(join(dir, `${name}.gguf`)) }),
  });
}

describe("a model of several whose plan uses an RPC worker", () => {
  test("holds the worker's whole budget: a second model on it is not admitted beside it", async () => {
    await using dir = tmpdir();
    const a = await runtimeOf(dir.path, "a", 6).plannedBytes();
    const b = await runtimeOf(dir.path, "b", 4).plannedBytes();
    expect(a.bytes).toEqual({ cpu: 1 * GIB, rpc0: 20 * GIB });
    const held = [{ name: "a", bytes: a.bytes, busy: false, pinned: false, lastUsedAt: 0 }];
    expect(decideFit(held, b.budget, { name: "b", bytes: b.bytes })).toEqual({
      kind: "evict",
      models: ["a"],
    });
  });
});
