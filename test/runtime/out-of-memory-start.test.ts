import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import type { PlanHint } from "../../src/runtime/supervisor-options.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, rejection, testPlan } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

// ggml-cuda.cu's and llama-model.cpp's lines when a CUDA buffer does not fit (b10587's format
// strings), then llama-server's exit 1.
const CUDA_OUT_OF_MEMORY = [
  "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory",
  "E alloc_tensor_range: failed to allocate CUDA0 buffer of size 4617393920",
  "E llama_model_load: error loading model: unable to allocate CUDA0 buffer",
  "E llama_model_load_from_file_impl: failed to load model",
].join("\n");

/** A supervisor whose plan offloads 10 layers fewer for each start that ran out of GPU memory. */
function planned(dir: string, env: Record<string, string>, layers = (n: number) => 33 - 10 * n) {
  const hints: number[] = [];
  const argvLog = join(dir, "argv.txt");
  let model = "";
  const plan = async (hint: PlanHint) => {
    hints.push(hint.outOfMemory);
    return testPlan(model, { gpu_layers: layers(hint.outOfMemory) });
  };
  const h = makeSupervisor(dir, {
    env: { FAKE_LLAMA_FAIL_START: CUDA_OUT_OF_MEMORY, FAKE_LLAMA_ARGV_LOG: argvLog, ...env },
    options: { plan },
  });
  model = h.model;
  const ngl = () => {
    const argv = readFileSync(argvLog, "utf8").split("\n");
    return Number(argv[argv.indexOf("-ngl") + 1]);
  };
  return { ...h, hints, ngl };
}

describe.skipIf(process.platform === "win32")(
  "a start that runs out of GPU memory (docs/supervisor.md)",
  () => {
    test("is planned again with more of the GPU kept free, in the same start, until it fits", async () => {
      await using dir = tmpdir();
      // The GPU holds 20 layers: 33 and 23 run out of memory, 13 fits.
      const { supervisor, hints, ngl } = planned(dir.path, { FAKE_LLAMA_FAIL_ABOVE_NGL: "20" });
      const progress: StartProgress[] = [];
      const lease = await supervisor.acquire(never(), (p) => progress.push(p));
      try {
        expect(hints).toEqual([0, 1, 2]);
        expect(ngl()).toBe(13);
        expect(
          progress.filter((p) => p.phase === "starting").map((p) => (p as { attempt?: number }).attempt),
        ).toEqual([1, 2, 3]);
        expect(progress.at(-1)?.phase).toBe("ready");
        // status says so: two starts ran out, and the server runs with the replanned layers.
        expect(supervisor.snapshot()).toMatchObject({ outOfMemoryStarts: 2, gpuLayers: 13 });
      } finally {
        lease.release();
        await supervisor.stop();
      }
    });

    test("at most three times, and not when the plan would not change, then the error; never with no layers on the GPU", async () => {
      await using dir = tmpdir();
      const always = planned(dir.path, {}, () => 33);
      const err = await rejection(always.supervisor.acquire(never()));
      expect(err).toMatchObject({ code: "model_plan_error" });
      expect(err.message).toContain("out of GPU memory");
      expect(always.hints).toEqual([0, 1]);
      await always.supervisor.stop();

      // One that does shrink, but never enough: three more plans, then the error.
      await using shrinking = tmpdir();
      const tooSmall = planned(shrinking.path, { FAKE_LLAMA_FAIL_ABOVE_NGL: "2" });
      expect((await rejection(tooSmall.supervisor.acquire(never()))).message).toContain("out of GPU memory");
      expect(tooSmall.hints).toEqual([0, 1, 2, 3]);
      await tooSmall.supervisor.stop();

      await using cpu = tmpdir();
      const none = planned(cpu.path, {}, () => 0);
      expect((await rejection(none.supervisor.acquire(never()))).code).toBe("model_plan_error");
      expect(none.hints).toEqual([0]);
      await none.supervisor.stop();
    });

    test("the RAM running out is not planned again", async () => {
      await using dir = tmpdir();
      const ram = planned(dir.path, {
        FAKE_LLAMA_FAIL_START:
          "E ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 68719476736",
      });
      const err = await rejection(ram.supervisor.acquire(never()));
      expect(err.message).toContain("ran out of memory");
      expect(ram.hints).toEqual([0]);
      await ram.supervisor.stop();
    });
  },
);
