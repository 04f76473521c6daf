import { expect, spyOn, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { PromptReuse, type ReuseDeps } from "../../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../../src/config/schema.ts";
import { parseProps } from "../../../src/llama/props.ts";
import type { LlamaLease } from "../../../src/runtime/endpoint.ts";
import { SlotUse } from "../../../src/runtime/slot-use.ts";
import { logger } from "../../../src/util/logger.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";
import { waitFor } from "../../fixtures/wait.ts";

// A session taking the slot of another whose changes are unsaved, with no RAM cache to keep them,
// saves them to disk first, on its turn's path (docs/agent.md#prompt-reuse). A save llama-server
// never answers (a wedged server, a slow disk: its own limit is 60 s) held the taking turn with
// no way to cancel it: a `cancel` must answer at once whatever the server does.

test("a turn cancelled while the evicting save of its slot's holder hangs rejects at once", async () => {
  using dir = tmpdir();
  const model = join(dir.path, "model.gguf");
  writeFileSync(model, "model");
  const saveAsked = Promise.withResolvers<void>();
  const answer = Promise.withResolvers<Response>();
  // llama-server's /slots/0?action=save taken up, answered only when the test says (an empty slot).
  await using server = Bun.serve({
    port: 0,
    fetch: (req) => {
      if (new URL(req.url).searchParams.get("action") === "save") saveAsked.resolve();
      return answer.promise;
    },
  });
  const props = parseProps({ model_path: model, default_generation_settings: { n_ctx: 2048 } });
  const launch = {
    id: 1,
    epoch: "1#0",
    baseUrl: `http://127.0.0.1:${server.port}`,
    died: new AbortController().signal,
    awake: true,
    slots: new SlotUse(1),
    props: async () => props,
    projector: null,
    extraArgs: null,
    files: null,
    takeFilesAhead: async () => undefined,
  };
  const kv = join(dir.path, "kv");
  mkdirSync(kv);
  const deps: ReuseDeps = {
    llama: ConfigSchema.parse({}).llama,
    disk: new KvDisk(kv, 1 << 20),
    cacheRamBytes: () => 0, // no RAM cache: the holder's changes go to disk before the slot goes
    quietSeen: () => {},
  };
  const reuse = new PromptReuse(deps);
  const lease = { launch } as unknown as LlamaLease;
  const live = new AbortController().signal;
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const first = await reuse.begin(lease, { userId: "u", sessionId: "x" }, live);
    first.started();
    first.end({ cut: 10, notes: [] }, true); // x's slot changed, unsaved
    const cancel = new AbortController();
    const turn = reuse.begin(lease, { userId: "u", sessionId: "y" }, cancel.signal);
    const settled = turn.then(
      () => "answered",
      () => "rejected",
    );
    await saveAsked.promise;
    cancel.abort(new Error("cancelled"));
    expect(await Promise.race([settled, Bun.sleep(50).then(() => "hung")])).toBe("rejected");
    // Given up: the slot is not y's (x still holds it), and busy while llama-server saves from it.
    expect(launch.slots.holderOf(0)).toBe("u/x");
    expect(launch.slots.idle()).toBe(false);
    // The save answers at last: the slot is free, and y, gone, never held it (its tokens would
    // count as there for an erase of y to empty).
    answer.resolve(
      Response.json({ id_slot: 0, filename: "f", n_saved: 0, n_written: 0, timings: { save_ms: 1 } }),
    );
    expect(await waitFor(() => launch.slots.idle(), { timeoutMs: 5000, intervalMs: 1 })).toBe(true);
    await reuse.begin(lease, { userId: "u", sessionId: "z" }, live);
    expect(launch.slots.sessionsIn(0)).toEqual(["u/z", "u/x"]);
  } finally {
    warn.mockRestore();
    server.stop(true);
  }
});
