import { describe, expect, test } from "bun:test";
import type { HardwareSnapshot } from "../../src/plan/hardware.ts";
import { ProbeAhead } from "../../src/plan/probe-ahead.ts";
import type { PlanHint } from "../../src/runtime/supervisor-options.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, testPlan, waitFor } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

// A probe begun while a llama-server held its VRAM read that memory as used: once the server is
// gone (a crash, a start that ran out of GPU memory), the next plan must not join it
// (plan/probe-ahead.ts `changed`), or it plans too few layers on the GPU.

const CUDA_OUT_OF_MEMORY = [
  "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory",
  "E llama_model_load: error loading model: unable to allocate CUDA0 buffer",
].join("\n");

/**
 * The shared probe, its snapshots told apart by the probe's number. The second probe (a host's
 * `models` listing, begun while the server holds its memory) answers only when `answerSecond`.
 */
function probes() {
  let n = 0;
  const second = Promise.withResolvers<void>();
  const ahead = new ProbeAhead(async (): Promise<HardwareSnapshot> => {
    const nth = ++n;
    if (nth === 2) await second.promise;
    return cpuOnlyMachine({ probes: [{ id: "n", status: "ok", message: String(nth), ms: 0 }] });
  });
  return { ahead, answerSecond: () => second.resolve() };
}

/** A supervisor over the stand-in whose plans take the shared probe; `read`: which probe each plan read. */
function supervised(dir: string, env: Record<string, string>, layers: (hint: PlanHint) => number) {
  const { ahead, answerSecond } = probes();
  const read: string[] = [];
  let model = "";
  let listing: Promise<HardwareSnapshot> | undefined;
  const plan = async (hint: PlanHint) => {
    // The plan after the server went: the listing's probe ends now, after the exit.
    if (listing) answerSecond();
    read.push((await ahead.take()).probes[0]!.message);
    return testPlan(model, { gpu_layers: layers(hint) });
  };
  const h = makeSupervisor(dir, { env, options: { plan, onChildGone: () => ahead.changed() } });
  model = h.model;
  const listWhileLoaded = () => {
    listing = ahead.look();
  };
  return { ...h, read, listWhileLoaded, listed: () => listing };
}

describe.skipIf(process.platform === "win32")("the shared probe after a llama-server is gone", () => {
  test("a restart after a crash does not join the probe that was running at the crash", async () => {
    await using dir = tmpdir();
    const { supervisor, read, listWhileLoaded, listed } = supervised(dir.path, {}, () => 0);
    const lease = await supervisor.acquire(never());
    listWhileLoaded();
    process.kill(supervisor.pid() as number, "SIGKILL");
    expect(await waitFor(() => lease.died.aborted)).toBe(true);
    lease.release();
    const again = await supervisor.acquire(never());
    try {
      expect(read).toEqual(["1", "3"]);
      // The listing still has its answer.
      expect((await listed())?.probes[0]?.message).toBe("2");
    } finally {
      again.release();
      await supervisor.stop();
    }
  });

  test("a start planned again after running out of GPU memory does not join a probe begun during it", async () => {
    await using dir = tmpdir();
    let listed = false;
    const { supervisor, read, listWhileLoaded } = supervised(
      dir.path,
      { FAKE_LLAMA_FAIL_START: CUDA_OUT_OF_MEMORY, FAKE_LLAMA_FAIL_ABOVE_NGL: "20" },
      (hint) => {
        // The listing's probe begins as the first launch (33 layers, too many) is about to load.
        if (!listed) {
          listed = true;
          listWhileLoaded();
        }
        return hint.outOfMemory === 0 ? 33 : 13;
      },
    );
    const lease = await supervisor.acquire(never());
    try {
      expect(read).toEqual(["1", "3"]);
      expect(supervisor.snapshot()).toMatchObject({ outOfMemoryStarts: 1, gpuLayers: 13 });
    } finally {
      lease.release();
      await supervisor.stop();
    }
  });
});
