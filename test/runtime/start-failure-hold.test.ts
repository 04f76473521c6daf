import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LaunchPlan } from "../../src/plan/launch-plan.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { START_FAILURE_HOLD_MS } from "../../src/runtime/launcher.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, rejection, testPlan, waitFor } from "./helpers/harness.ts";

/**
 * A llama-server that dies while it loads (an RPC worker that crashes it, a model it cannot
 * read) fails every start the same way: each chat after the first must not pay the whole load
 * again for the same answer (docs/supervisor.md, "Start failures").
 */
const never = () => new AbortController().signal;

function crashingAtLoad(dir: string, mmproj?: LaunchPlan["mmproj"]) {
  let spawns = 0;
  let clock = 1_000_000;
  let extra: string[] = [];
  let model = "";
  let gate: Promise<void> | undefined;
  const h = makeSupervisor(dir, {
    env: { FAKE_LLAMA_FAIL_START: "E something odd happened", FAKE_LLAMA_FAIL_EXIT: "3" },
    options: {
      now: () => clock,
      // Read at each start: a test changes its extra args to make another plan.
      plan: async () => {
        await gate;
        return testPlan(model, { extra_args: extra, ...(mmproj ? { mmproj } : {}) });
      },
      spawner: (req) => {
        spawns++;
        return bunSpawner(req);
      },
    },
  });
  model = h.model;
  return {
    ...h,
    spawns: () => spawns,
    advance: (ms: number) => {
      clock += ms;
    },
    replan: (args: string[]) => {
      extra = args;
    },
    /** The next plans wait until the function returned is called. */
    gatePlans: () => {
      const open = Promise.withResolvers<void>();
      gate = open.promise;
      return () => {
        gate = undefined;
        open.resolve();
      };
    },
  };
}

describe.skipIf(process.platform === "win32")("a start that failed the same way a moment ago", () => {
  test("the next chat gets its error at once, without loading again; a warmup tries at once", async () => {
    await using dir = tmpdir();
    const h = crashingAtLoad(dir.path);
    try {
      const first = await rejection(h.supervisor.acquire(never()));
      expect(first.code).toBe("internal_error");
      expect(h.spawns()).toBe(1);
      const second = await rejection(h.supervisor.acquire(never()));
      expect(second).toBeInstanceOf(CoreError);
      expect(second.code).toBe(first.code);
      expect(second.message).toContain(first.message);
      expect(second.message).toMatch(/a warmup tries again at once/);
      expect(second.data).toMatchObject({ retry_in_ms: START_FAILURE_HOLD_MS });
      expect(h.spawns()).toBe(1);
      // The host asked: tried again whatever happened before.
      await rejection(h.supervisor.acquire(never(), undefined, { explicit: true }));
      expect(h.spawns()).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });

  test("a warmup that joins a chat's start while it plans is the host asking: that start launches", async () => {
    await using dir = tmpdir();
    const h = crashingAtLoad(dir.path);
    try {
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(1);
      // A chat's start is planning when the host's warmup arrives and joins it.
      const open = h.gatePlans();
      // The chat's acquire begins the start at once (stopped → starting), its plan waiting.
      const chat = rejection(h.supervisor.acquire(never()));
      const warmup = rejection(h.supervisor.acquire(never(), undefined, { explicit: true }));
      open();
      const [, tried] = await Promise.all([chat, warmup]);
      // Launched again: not the held error that tells it a warmup tries again at once.
      expect(tried.message).not.toMatch(/a warmup tries again at once/);
      expect(h.spawns()).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });

  test("another plan (a config changed, a worker left out) or the window passed: started again", async () => {
    await using dir = tmpdir();
    const h = crashingAtLoad(dir.path);
    try {
      await rejection(h.supervisor.acquire(never()));
      h.replan(["--temp", "0.5"]);
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(2);
      h.advance(START_FAILURE_HOLD_MS - 1);
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(2);
      h.advance(1);
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(3);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("a restart after a crash", () => {
  test("is not held: the restart budget paces it, and a held one would spend it launching nothing", async () => {
    await using dir = tmpdir();
    let failing = false;
    let spawns = 0;
    let clock = 1_000_000;
    const h = makeSupervisor(dir.path, {
      settings: { maxRestarts: 3, restartBackoffMs: 10 },
      options: {
        now: () => clock,
        // Once the server has crashed, each launch of it exits as it loads (the same launch).
        spawner: (req) => {
          spawns++;
          return bunSpawner(failing ? { ...req, path: "/bin/false" } : req);
        },
      },
    });
    try {
      const lease = await h.supervisor.acquire(never());
      failing = true;
      process.kill(h.supervisor.pid() as number, "SIGKILL");
      expect(await waitFor(() => lease.died.aborted)).toBe(true);
      lease.release();
      // Three restarts, each a launch: none answered from the one before without loading.
      for (let i = 0; i < 3; i++) await rejection(h.supervisor.acquire(never()));
      expect(spawns).toBe(4);
      // The budget is spent by launches that were made: the next is refused, naming it.
      clock += START_FAILURE_HOLD_MS;
      const spent = await rejection(h.supervisor.acquire(never()));
      expect(spent.message).toContain("not restarting");
      expect(spawns).toBe(4);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("a start planned again after running out of GPU memory", () => {
  test("that then fails is held as the launch it made, which the next start plans again", async () => {
    await using dir = tmpdir();
    let spawns = 0;
    let model = "";
    const h = makeSupervisor(dir.path, {
      env: {
        FAKE_LLAMA_FAIL_START:
          "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory\nE llama_model_load: error loading model: unable to allocate CUDA0 buffer",
        FAKE_LLAMA_FAIL_ABOVE_NGL: "20",
      },
      options: {
        // 10 layers fewer for each start that ran out of GPU memory.
        plan: async (hint) => testPlan(model, { gpu_layers: 33 - 10 * hint.outOfMemory }),
        // The first launch runs out of GPU memory; the one planned again exits as it loads.
        spawner: (req) => bunSpawner(++spawns === 1 ? req : { ...req, path: "/bin/false" }),
      },
    });
    model = h.model;
    try {
      await rejection(h.supervisor.acquire(never()));
      expect(spawns).toBe(2);
      const second = await rejection(h.supervisor.acquire(never()));
      expect(second.message).toMatch(/a warmup tries again at once/);
      expect(spawns).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("a start that failed with a projector", () => {
  test("launches again once the projector file is replaced (pulled again), as for the model's", async () => {
    await using dir = tmpdir();
    const projector = join(dir.path, "mmproj.gguf");
    writeFileSync(projector, "a projector llama-server cannot read");
    const h = crashingAtLoad(dir.path, { path: projector, image_tokens: { max: null, min: null } });
    try {
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(1);
      // Another file at the same path (a new inode, as a pull's rename makes).
      rmSync(projector);
      writeFileSync(projector, "the projector pulled again, whole");
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("a start that failed on an older llama-server", () => {
  test("launches again once the binary is replaced at its path (upgraded to read the model)", async () => {
    await using dir = tmpdir();
    const h = crashingAtLoad(dir.path);
    try {
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(1);
      // The same script again at a new inode, as an installer's rename leaves it.
      const script = readFileSync(h.binary);
      rmSync(h.binary);
      writeFileSync(h.binary, script, { mode: 0o755 });
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("a launch that could not spawn", () => {
  test("is not held: nothing loaded, and the binary made runnable (or files closed) starts at once", async () => {
    await using dir = tmpdir();
    let spawns = 0;
    const h = makeSupervisor(dir.path, {
      options: {
        now: () => 1_000_000,
        // The first spawn is refused (a binary not executable yet, or out of open files).
        spawner: (req) => {
          if (++spawns === 1) throw Object.assign(new Error("permission denied"), { code: "EACCES" });
          return bunSpawner(req);
        },
      },
    });
    try {
      const refused = await rejection(h.supervisor.acquire(never()));
      expect(refused.code).toBe("binary_missing");
      const lease = await h.supervisor.acquire(never());
      lease.release();
      expect(spawns).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("the hold asked before a load (several models)", () => {
  test("once the hold is over, asking it does not ask the binary again", async () => {
    // checkHold renders the launch's argv to compare keys: the binary's --help asked when the
    // plan has memory flags (not remembered when it did not answer), every load for as long as
    // the failure is remembered, though no start of it is held any more.
    await using dir = tmpdir();
    let clock = 1_000_000;
    let probes = 0;
    const h = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_FAIL_START: "E something odd happened", FAKE_LLAMA_FAIL_EXIT: "3" },
      plan: { mlock: true },
      options: {
        now: () => clock,
        loadMode: async () => {
          probes++;
          return false;
        },
      },
    });
    try {
      await rejection(h.supervisor.acquire(never()));
      const plan = testPlan(h.model, { mlock: true });
      expect(await rejection(h.supervisor.checkHold(plan, false))).toBeInstanceOf(CoreError);
      const asked = probes;
      clock += START_FAILURE_HOLD_MS;
      await h.supervisor.checkHold(plan, false);
      expect(probes).toBe(asked);
    } finally {
      await h.supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("a start that failed with a LoRA adapter", () => {
  test("launches again once the adapter file is replaced (retrained), as for the projector's", async () => {
    await using dir = tmpdir();
    const adapter = join(dir.path, "style.gguf");
    writeFileSync(adapter, "an adapter half written by its trainer");
    const h = crashingAtLoad(dir.path);
    h.replan(["--lora", adapter]);
    try {
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(1);
      // The trainer's finished file at the same path (a new inode, as its rename makes).
      rmSync(adapter);
      writeFileSync(adapter, "the adapter trained to the end, whole");
      await rejection(h.supervisor.acquire(never()));
      expect(h.spawns()).toBe(2);
    } finally {
      await h.supervisor.stop();
    }
  });
});
