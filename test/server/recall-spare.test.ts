import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { findModel } from "../../src/config/choose-model.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { memoryEmbedder } from "../../src/server/memory-embedding.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { Store } from "../../src/store/store.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { FakeFleet, signal } from "../runtime/helpers/fake-model-runtime.ts";

// A machine with room for one model of two (6 GiB each on a 10 GiB gpu0): a chat's recall asks its
// input's vector (agent/turn/memory.ts, given up after 1.5 s). It unloaded the chat's own model to
// load the embedding model, and the chat then loaded its model again: two swaps every turn. Now
// the query goes without a vector at once, and nothing is logged for it.

describe("recall's query vector on a machine with room for one model", () => {
  test("unloads no model to load the embedding model: recall goes on by words", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const config = ConfigSchema.parse({
      model: { path: "/m/default.gguf" },
      memory: { enabled: true, embedding_model: "embed" },
      models: [
        { name: "chat", path: "/m/chat.gguf" },
        { name: "embed", path, kind: "embedding" },
      ],
    });
    const fleet = new FakeFleet({ chat: { gib: 6 }, embed: { gib: 6 } });
    // The fakes plan themselves; no pinned set is over the budget.
    const unused = () => Promise.reject(new Error("not asked"));
    const noProblem = async () => null;
    const several = new SeveralModels({
      config: () => config,
      runtime: fleet.runtime,
      pinnedProblem: noProblem,
      plan: unused,
      reuse: () => ({}) as PromptReuse,
    });
    const store = Store.open(join(dir.path, "data"));
    const job = memoryEmbedder(config, store, several, new DriveAnswers());
    const row = (name: string) => several.scheduler.snapshot().models.find((m) => m.name === name);
    try {
      const chat = findModel(config, "chat");
      await several.load(chat, { pin: undefined, signal: signal(), onProgress: () => {} });
      const turn = several.chatSignal(chat, signal());
      // Before the fix: the chat's model unloaded for the embedder, the recall waiting 1.5 s for it.
      expect(await job?.queryVector("what did I say about cats?", signal())).toBeUndefined();
      expect(row("chat")?.state).toBe("loaded");
      expect(row("embed")?.state).toBe("unloaded");
      expect(fleet.log.filter((l) => l.startsWith("chat."))).toEqual(["chat.start"]);
      turn.done();
    } finally {
      await job?.stop();
      store.close();
      await several.stop();
    }
  });
});
