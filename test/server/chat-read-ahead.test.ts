import { expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readAheadForChat } from "../../src/server/chat-read-ahead.ts";

const config = ConfigSchema.parse({ model: { path: "/m/model.gguf" } });

/** Two turns of the loop: the read-ahead's immediate, then the one after its (stand-in) probe. */
const turns = async () => {
  for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
};

for (const begun of [false, true]) {
  test(`the chat's modules are read ahead ${begun ? "not once a chat has begun" : "while no chat has begun"}`, async () => {
    // A chat sent at once has its own modules and loads its turn's after its spawn: evaluated by
    // the read-ahead too (~25 ms on the one thread), they held its plan's awaits and its spawn.
    let loaded = 0;
    readAheadForChat({
      standIn: true,
      config: () => config,
      store: () => undefined,
      stopping: () => false,
      chatBegun: () => begun,
      loadModules: () => {
        loaded++;
      },
    });
    await turns();
    expect(loaded).toBe(begun ? 0 : 1);
  });
}
