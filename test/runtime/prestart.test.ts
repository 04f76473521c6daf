import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { makeSupervisor } from "./helpers/harness.ts";

/**
 * prestart(): a chat begins llama-server's start on arrival, before its session, memory and
 * tools are ready (issue 11 item 4, the cold chat's overhead), then hears it through acquire.
 */
const never = () => new AbortController().signal;

/** A supervisor whose every plan fails (no model), counting the plans. */
function failingSupervisor(dir: string) {
  let plans = 0;
  const { supervisor } = makeSupervisor(dir, {
    options: {
      plan: async () => {
        plans++;
        throw new CoreError("model_missing", "model /x.gguf: absent: no such file");
      },
    },
  });
  return { supervisor, plans: () => plans };
}

describe.skipIf(process.platform === "win32")("prestart", () => {
  test("begins one start without a slot; acquire joins it and hears its progress", async () => {
    await using dir = tmpdir();
    let spawns = 0;
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_LOAD_MS: "300" },
      options: {
        spawner: (req) => {
          spawns++;
          return bunSpawner(req);
        },
      },
    });
    try {
      const ticket = supervisor.prestart();
      expect(ticket).toBeDefined();
      expect(supervisor.currentState()).toBe("starting");
      // Already starting: nothing more to begin.
      expect(supervisor.prestart()).toBeUndefined();
      await Bun.sleep(100); // the turn's own preparation
      const progress: StartProgress[] = [];
      const lease = await supervisor.acquire(never(), (p) => progress.push(p), { prestarted: ticket });
      // A late joiner hears the current phase at once, then the rest up to ready.
      expect(progress[0]?.elapsed_ms).toBeGreaterThanOrEqual(90);
      expect(progress.at(-1)?.phase).toBe("ready");
      expect(spawns).toBe(1);
      lease.release();
      // Up and ready: prestart has nothing to do.
      expect(supervisor.prestart()).toBeUndefined();
    } finally {
      await supervisor.stop();
    }
  });

  test("a prestart that failed is the acquirer's error, once, with no second launch", async () => {
    await using dir = tmpdir();
    const { supervisor, plans } = failingSupervisor(dir.path);
    try {
      const ticket = supervisor.prestart();
      // The start fails while the turn prepares.
      expect(await waitFor(() => supervisor.currentState() === "stopped", { intervalMs: 2 })).toBe(true);
      const err = await supervisor.acquire(never(), undefined, { prestarted: ticket }).catch((e) => e);
      expect(err).toBeInstanceOf(CoreError);
      expect((err as CoreError).code).toBe("model_missing");
      expect(plans()).toBe(1);
      // The ticket is spent: a later acquire (the next chat) tries again.
      const again = await supervisor.acquire(never(), undefined, { prestarted: ticket }).catch((e) => e);
      expect((again as CoreError).code).toBe("model_missing");
      expect(plans()).toBe(2);
    } finally {
      await supervisor.stop();
    }
  });

  test("an acquire without the ticket does not inherit another caller's failure", async () => {
    await using dir = tmpdir();
    const { supervisor, plans } = failingSupervisor(dir.path);
    try {
      supervisor.prestart();
      expect(await waitFor(() => supervisor.currentState() === "stopped", { intervalMs: 2 })).toBe(true);
      await supervisor.acquire(never()).catch(() => {});
      expect(plans()).toBe(2);
    } finally {
      await supervisor.stop();
    }
  });
});

describe.skipIf(process.platform === "win32")("ready", () => {
  test("starts the server and resolves once it is ready, taking no slot; a lease after it is the first", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path);
    try {
      const progress: StartProgress[] = [];
      await supervisor.ready(never(), (p) => progress.push(p));
      expect(supervisor.currentState()).toBe("ready");
      expect(progress.at(-1)?.phase).toBe("ready");
      expect(supervisor.snapshot().slots.busy).toBe(0);
      const pid = supervisor.pid();
      // Ready already: nothing started again.
      await supervisor.ready(never());
      const lease = await supervisor.acquire(never());
      expect(supervisor.pid()).toBe(pid);
      expect(supervisor.snapshot().slots.busy).toBe(1);
      lease.release();
    } finally {
      await supervisor.stop();
    }
  });

  test("connectAhead opens a connection only to a ready server with a slot free (a chat's first request's)", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { env: { FAKE_LLAMA_LOAD_MS: "200" } });
    try {
      expect(supervisor.connectAhead()).toBeUndefined();
      expect(supervisor.prestart()).toBeDefined();
      expect(supervisor.connectAhead()).toBeUndefined(); // starting
      const lease = await supervisor.acquire(never());
      expect(supervisor.connectAhead()).toBeUndefined(); // its one slot is leased
      lease.release();
      const spare = supervisor.connectAhead();
      expect(spare).toBeDefined();
      expect(supervisor.connectAhead()).toBeUndefined(); // the free slot has its spare
      spare?.close();
      supervisor.connectAhead()?.close();
    } finally {
      await supervisor.stop();
    }
    expect(supervisor.connectAhead()).toBeUndefined();
  });
});
