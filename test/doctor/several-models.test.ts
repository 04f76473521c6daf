import { describe, expect, test } from "bun:test";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { pinnedPlansProblem, pinnedSetMessage, pinnedSetProblem } from "../../src/models/pinned-set.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { checkById, coreWithConfig, doctorDeps } from "./helpers/config-core.ts";

// doctor checks every configured model (docs/doctor.md "Several models").

// tinyLlama at 2048 tokens plans ~14 MB on the CPU: one fits 20 MB, two do not.
const TWO_PINNED = `model:
  path: ./m.gguf
  context: 2048
models:
  - name: a
    path: ./a.gguf
    context: 2048
    pin: true
  - name: b
    path: ./b.gguf
    context: 2048
    pin: true
hardware:
  ram_bytes: 20000000
`;

describe("doctor over several models", () => {
  test("the second model missing: its own checks name it, default's ids are unchanged", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", tinyLlama());
    writeGguf(dir.path, "q.gguf", tinyLlama());
    const core = coreWithConfig(
      dir.path,
      "model:\n  path: ./m.gguf\nmodels:\n  - name: q\n    path: ./q.gguf\n  - name: gone\n    path: ./gone.gguf\n",
    );
    const r = await runDoctor(core, doctorDeps);
    expect(r.ok).toBe(false);
    expect(r.checks.map((c) => [c.id, c.status])).toEqual([
      ["config", "ok"],
      ["binary", "ok"],
      ["model", "ok"],
      ["model:q", "ok"],
      ["model:gone", "fail"],
      ["hardware", "ok"],
      ["data_dir", "ok"],
      ["run_records", "ok"],
      ["store", "ok"],
      ["plan", "ok"],
      ["plan:q", "ok"],
      ["plan:gone", "skip"],
    ]);
    const gone = checkById(r, "model:gone")!;
    expect(gone.message).toContain("gone.gguf");
    expect(gone.fix).toContain("models.1.path");
    expect(gone.data?.model).toBe("gone");
    expect(checkById(r, "model")!.data?.model).toBeUndefined();
  });

  test("an embedding entry is checked as a GGUF and for fit", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", tinyLlama());
    writeGguf(dir.path, "e.gguf", tinyLlama());
    const core = coreWithConfig(
      dir.path,
      "model:\n  path: ./m.gguf\nmodels:\n  - name: embed\n    path: ./e.gguf\n    kind: embedding\n",
    );
    const r = await runDoctor(core, doctorDeps);
    expect(r.ok).toBe(true);
    expect(checkById(r, "model:embed")?.status).toBe("ok");
    expect(checkById(r, "plan:embed")?.message).toContain("embeddings (pooling mean), inputs of up to");
    expect(checkById(r, "plan:embed")?.data?.argv).toContain("--embeddings");
  });

  test("a pinned pair over the hardware.ram_bytes budget fails one check naming both", async () => {
    using dir = tmpdir();
    for (const f of ["m.gguf", "a.gguf", "b.gguf"]) writeGguf(dir.path, f, tinyLlama());
    const r = await runDoctor(coreWithConfig(dir.path, TWO_PINNED), doctorDeps);
    expect(r.ok).toBe(false);
    expect(r.checks.filter((c) => c.status === "fail").map((c) => c.id)).toEqual(["pinned"]);
    const pinned = checkById(r, "pinned")!;
    expect(pinned.message).toContain("a, b");
    expect(pinned.data).toMatchObject({
      models: ["a", "b"],
      devices: [{ device: "cpu", budget_bytes: 20_000_000 }],
    });
    // Each alone fits: the plans pass.
    expect(checkById(r, "plan:a")?.status).toBe("ok");
    expect(checkById(r, "plan:b")?.status).toBe("ok");
  });

  test("a pinned pair that fits passes; the runtime's pinnedSetProblem agrees with doctor", async () => {
    using dir = tmpdir();
    for (const f of ["m.gguf", "a.gguf", "b.gguf"]) writeGguf(dir.path, f, tinyLlama());
    const fits = coreWithConfig(dir.path, TWO_PINNED.replace("20000000", "40000000"));
    expect(checkById(await runDoctor(fits, doctorDeps), "pinned")?.status).toBe("ok");
    expect(await pinnedSetProblem(fits.loadedConfig().config, doctorDeps)).toBeNull();
    const over = coreWithConfig(dir.path, TWO_PINNED);
    expect(await pinnedSetProblem(over.loadedConfig().config, doctorDeps)).toMatchObject({
      models: ["a", "b"],
    });
  });

  test("no pinned pair, no pinned check", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "m.gguf", tinyLlama());
    const r = await runDoctor(coreWithConfig(dir.path, "model:\n  path: ./m.gguf\n"), doctorDeps);
    expect(checkById(r, "pinned")).toBeUndefined();
  });
});

describe("pinnedPlansProblem", () => {
  const GIB = 2 ** 30;
  const device = (id: string, total: number, budget: number) =>
    ({ id, usage: { total }, budget_bytes: budget }) as unknown as DevicePlan;
  test("pinned models that fit together: null", () => {
    expect(pinnedPlansProblem([{ name: "a", devices: [device("gpu0", 5 * GIB, 10 * GIB)] }])).toBeNull();
  });

  test("pinned models over a device's budget together: the device and the models on it", () => {
    const planned = [
      { name: "a", devices: [device("gpu0", 6 * GIB, 10 * GIB), device("cpu", 1 * GIB, 32 * GIB)] },
      { name: "b", devices: [device("gpu0", 6 * GIB, 10 * GIB)] },
      { name: "c", devices: [device("cpu", 1 * GIB, 32 * GIB)] },
    ];
    expect(pinnedPlansProblem(planned)).toEqual({
      devices: [{ device: "gpu0", needed_bytes: 12 * GIB, budget_bytes: 10 * GIB }],
      models: ["a", "b"],
    });
  });

  test("two pinned models on one RPC worker never load together, however few layers each puts there", () => {
    // A worker serves one llama-server at a time: the scheduler holds it whole for a model whose
    // plan lists it (server/model-runtime.ts), so doctor's check must count it whole too.
    const rpc = (total: number) =>
      ({ id: "rpc0", kind: "rpc", usage: { total }, budget_bytes: 20 * GIB }) as unknown as DevicePlan;
    const planned = [
      { name: "a", devices: [rpc(4 * GIB)] },
      { name: "b", devices: [rpc(0)] },
    ];
    const problem = pinnedPlansProblem(planned);
    expect(problem).toEqual({
      devices: [{ device: "rpc0", needed_bytes: 40 * GIB, budget_bytes: 20 * GIB }],
      models: ["a", "b"],
      workers: ["rpc0"],
    });
    // Said as what it is: "needs 40 GiB of its 20 GiB" sent the user to shrink a model, which never helps.
    const message = pinnedSetMessage(problem!);
    expect(message).toContain("rpc0 is an RPC worker, which serves one model at a time");
    expect(message).not.toContain("needs");
  });
});
