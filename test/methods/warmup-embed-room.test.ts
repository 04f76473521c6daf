import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig } from "../../src/config/load.ts";
import { chat } from "../../src/methods/chat.ts";
import { modelsLoad } from "../../src/methods/models-load.ts";
import type { Services } from "../../src/methods/services.ts";
import { warmup } from "../../src/methods/warmup.ts";
import type { LlamaProvider } from "../../src/runtime/endpoint.ts";
import { CoreServices } from "../../src/server/services.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A warmup loads the chat's model ahead of a chat (docs/protocol.md#lifecycle), a models.load a
// model ahead of its requests (docs/protocol.md#modelsload). Memory's job, granted an idle chat
// model's room after a pause (store/embed-room.ts), took it back from the model the host had just
// loaded at its next batch, on a machine with room for one model: the chat that followed loaded
// it again. Each now begins a chat for that job, as a chat does: counted by the core
// (services.ts `chatBegan`) whether or not the job is made yet, since a job made while the
// warmup's load ran (the store opened meanwhile) counted none and granted the room 30 s after
// its own start, not after the warmup's end.

/** The core as the method sees it: what it is told, in order, with the method's own steps. No job is made yet. */
function toldIndex() {
  const told: string[] = [];
  const chatBegan = () => {
    told.push("began");
    return () => told.push("ended");
  };
  const memoryIndex = () => undefined;
  return { told, memoryIndex, chatBegan };
}

const ctx = { signal: new AbortController().signal, emit: () => {} };

describe("warmup and memory's background job", () => {
  test("counts as a chat beginning and ending for the job's room", async () => {
    const { told, memoryIndex, chatBegan } = toldIndex();
    const services = {
      chatBegan,
      llama: () => ({
        acquire: async () => {
          told.push("acquired");
          return { release: () => {} };
        },
        slots: () => 1,
      }),
      config: () => ({ app: { data_dir: "/nowhere" } }),
      storeReady: async () => {},
      store: () => ({}),
      memoryIndex,
    } as unknown as Services;
    await warmup.run({ user_id: "ann" }, ctx as unknown as Parameters<typeof warmup.run>[1], services);
    expect(told).toEqual(["began", "acquired", "ended"]);
  });
});

describe("models.load and memory's background job", () => {
  // Failed too: a load that throws must still end its chat, or the job would never take the room.
  for (const outcome of ["loaded", "failed"] as const)
    test(`counts as a chat beginning and ending for the job's room (${outcome})`, async () => {
      using dir = tmpdir();
      const { told, memoryIndex, chatBegan } = toldIndex();
      const services = {
        chatBegan,
        config: () => defaultConfig(dir.path).config,
        models: () => ({
          load: async () => {
            told.push("load");
            if (outcome === "failed") throw new Error("the load failed");
            return { status: "loaded" };
          },
        }),
        memoryIndex,
      } as unknown as Services;
      const params = { model: "default" };
      const run = modelsLoad.run(params, ctx as unknown as Parameters<typeof modelsLoad.run>[1], services);
      if (outcome === "failed") await expect(run).rejects.toThrow("the load failed");
      else await run;
      expect(told).toEqual(["began", "load", "ended"]);
    });
});

describe("a chat and memory's background job", () => {
  // Counted before only through an embedder it managed to make (memoryIndex): with none made yet
  // (no embedding model now, the store not open yet), a job made while the chat ran counted no
  // chat and took the chat model's room 30 s after its own start.
  test("counts as a chat beginning and ending whether or not the job is made", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), `app:\n  data_dir: ${JSON.stringify(dir.path)}\n`);
    const provider: LlamaProvider = {
      acquire: () => Promise.reject(new Error("no server in this test")),
      slots: () => 1,
      stop: async () => {},
    };
    const services = new CoreServices({ configPath: "config.yaml", cwd: dir.path, llama: () => provider });
    const told: string[] = [];
    services.chatBegan = () => {
      told.push("began");
      return () => told.push("ended");
    };
    const chatCtx = { id: "c", signal: ctx.signal, emit: () => true, droppedEvents: 0, settle: () => true };
    // The turn ends however it ends (no server): only the count is watched.
    await Promise.resolve(chat.run(chat.params.parse({ input: "hi" }), chatCtx as never, services)).catch(
      () => {},
    );
    await services.stop();
    expect(services.memoryIndex({ create: false })).toBeUndefined();
    expect(told).toEqual(["began", "ended"]);
  });
});
