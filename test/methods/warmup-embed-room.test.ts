import { describe, expect, test } from "bun:test";
import type { Services } from "../../src/methods/services.ts";
import { warmup } from "../../src/methods/warmup.ts";

// A warmup loads the chat's model ahead of a chat (docs/protocol.md#lifecycle). Memory's job,
// granted an idle chat model's room after a pause (store/embed-room.ts), took it back from the
// model the host had just warmed at its next batch, on a machine with room for one model: the
// chat that followed loaded it again. A warmup now begins a chat for that job, as a chat does.

describe("warmup and memory's background job", () => {
  test("counts as a chat beginning and ending for the job's room", async () => {
    const told: string[] = [];
    const index = {
      chatBegan: () => {
        told.push("began");
        return () => told.push("ended");
      },
    };
    const services = {
      llama: () => ({
        acquire: async () => {
          told.push("acquired");
          return { release: () => {} };
        },
        slots: () => 1,
      }),
      config: () => ({ app: { data_dir: "/nowhere" } }),
      store: () => ({}),
      memoryIndex: (options?: { create: boolean }) => (options?.create === false ? index : undefined),
    } as unknown as Services;
    const ctx = { signal: new AbortController().signal, emit: () => {} };
    await warmup.run({ user_id: "ann" }, ctx as unknown as Parameters<typeof warmup.run>[1], services);
    expect(told).toEqual(["began", "acquired", "ended"]);
  });
});
