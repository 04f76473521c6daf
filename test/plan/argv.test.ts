import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { PLAN_DIALECT, renderArgv } from "../../src/plan/argv.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import type { LaunchPlan } from "../../src/plan/launch-plan.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { planFor } from "../../src/plan/planner.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// argv is rendered from the typed launch plan, once: the report's lines, the report's argv and
// what the supervisor launches are that one rendering (in the dialect the binary speaks).

const PLAN: LaunchPlan = {
  model_path: "/m/x.gguf",
  model_name: "x",
  model_bytes: 1,
  slots: 2,
  context_per_slot: 4096,
  max_tokens: null,
  gpu_layers: 33,
  rpc_workers: ["10.0.0.2:50052", "10.0.0.3:50052"],
  tensor_split: [10, 23],
  threads: 8,
  flash_attn: "on",
  cache_type_k: "q8_0",
  cache_type_v: "q8_0",
  mmap: true,
  mlock: false,
  jinja: true,
  idle_sleep_s: 300,
  cache_ram_mib: 256,
  slot_save_path: "/d/kv",
  extra_args: ["--temp", "0.2"],
};

describe("renderArgv", () => {
  test("every decision as its flag, in the report's order, extra_args last", () => {
    expect(renderArgv(PLAN, PLAN_DIALECT)).toEqual([
      ...["-m", "/m/x.gguf", "-np", "2", "-c", "8192", "-ngl", "33"],
      ...["--rpc", "10.0.0.2:50052,10.0.0.3:50052", "--tensor-split", "10,23", "-t", "8", "-fa", "on"],
      ...["--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--jinja", "--sleep-idle-seconds", "300"],
      ...["--cache-ram", "256", "--slot-save-path", "/d/kv"],
      ...["--temp", "0.2"],
    ]);
  });

  test("what has no value has no flag: no workers, no split, no idle sleep, no template, no slot folder", () => {
    const argv = renderArgv(
      {
        ...PLAN,
        rpc_workers: [],
        tensor_split: null,
        idle_sleep_s: 0,
        jinja: false,
        slot_save_path: null,
        extra_args: [],
      },
      PLAN_DIALECT,
    );
    for (const flag of ["--rpc", "--tensor-split", "--sleep-idle-seconds", "--jinja", "--slot-save-path"])
      expect(argv).not.toContain(flag);
  });

  test("--cache-ram is always rendered, 0 included: never llama-server's unplanned 8 GiB default", () => {
    const argv = renderArgv({ ...PLAN, cache_ram_mib: 0, extra_args: [] }, PLAN_DIALECT);
    expect(argv.slice(-4)).toEqual(["--cache-ram", "0", "--slot-save-path", "/d/kv"]);
  });

  test("the memory mode in each dialect: the pair, or the one --load-mode that means the same", () => {
    const memory = (mmap: boolean, mlock: boolean, memory: "mmap-flags" | "load-mode") =>
      renderArgv({ ...PLAN, mmap, mlock, extra_args: [] }, { memory })
        .slice(-10)
        .join(" ");
    expect(memory(true, false, "mmap-flags")).not.toMatch(/mmap|mlock|load-mode/);
    expect(memory(true, false, "load-mode")).not.toMatch(/mmap|mlock|load-mode/);
    expect(memory(false, false, "mmap-flags")).toContain("--no-mmap --jinja");
    expect(memory(false, false, "load-mode")).toContain("--load-mode none --jinja");
    expect(memory(false, true, "mmap-flags")).toContain("--no-mmap --mlock --jinja");
    expect(memory(false, true, "load-mode")).toContain("--load-mode mlock --jinja");
    expect(memory(true, true, "mmap-flags")).toContain("--cache-type-v q8_0 --mlock --jinja");
    expect(memory(true, true, "load-mode")).toContain("--load-mode mmap+mlock --jinja");
  });

  test("extra_args pass through as written, even a flag a decision also sets", () => {
    const argv = renderArgv(
      { ...PLAN, extra_args: ["--no-mmap", "--sleep-idle-seconds", "5"] },
      { memory: "load-mode" },
    );
    expect(argv.slice(-3)).toEqual(["--no-mmap", "--sleep-idle-seconds", "5"]);
  });
});

describe("the planner's launch and its report", () => {
  test("the report's argv is the launch rendered, and each decision's flags are its part of it", async () => {
    using dir = tmpdir();
    const model = modelInfo(await readGgufHeader(writeGguf(dir.path, "m.gguf", llama7b())));
    for (const raw of [
      {},
      { llama: { mmap: false, mlock: true, idle_sleep_s: 0, extra_args: ["--foo"] } },
      { llama: { parallel: 3, threads: 4, cache_type_k: "q8_0", cache_type_v: "q8_0" } },
    ]) {
      const { launch, plan } = planFor(model, cpuOnlyMachine(), ConfigSchema.parse(raw));
      expect(plan.argv).toEqual(renderArgv(launch, PLAN_DIALECT));
      expect(plan.argv).toEqual(["-m", launch.model_path, ...plan.decisions.flatMap((d) => d.flags)]);
      expect(launch).toMatchObject({
        slots: plan.slots,
        context_per_slot: plan.context_per_slot,
        threads: plan.threads,
        mmap: plan.mmap,
        mlock: plan.mlock,
        model_bytes: model.size_bytes,
      });
    }
  });
});
