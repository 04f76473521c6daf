import { describe, expect, spyOn, test } from "bun:test";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import type { ModelChoice } from "../../src/config/choose-model.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { embedWith } from "../../src/server/memory-embedding.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { IDLE_BEFORE_TAKING_MS } from "../../src/store/embed-room.ts";
import { MemoryEmbedder } from "../../src/store/memory-embedder.ts";
import { Store } from "../../src/store/store.ts";
import { logger } from "../../src/util/logger.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { commitNotedTurn } from "../fixtures/noted-turn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { FakeFleet, signal } from "../runtime/helpers/fake-model-runtime.ts";

// Memory's background job (store/memory-embedder.ts) embeds each turn's row a moment after the
// turn. On a machine with room for one model of two (6 GiB each on the fakes' 10 GiB gpu0) its
// ordinary ask unloaded the idle chat model after every turn, and the next turn loaded it again:
// a full reload (its KV saved and restored) per turn. Now it asks spare, and takes the room only
// once chats have been idle a while (store/embed-room.ts), its timer handed in here.

interface Timer {
  fn: () => void;
  ms: number;
  cancelled: boolean;
}

function setup(gib: number) {
  const standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED, apiKey: "key" });
  const embedName = standIn.baseUrl.replace("http://", "");
  const fleet = new FakeFleet({ chat: { gib }, [embedName]: { gib } });
  const several = new SeveralModels({
    config: () => ConfigSchema.parse({ model: { path: "/m/default.gguf" } }),
    reuse: () => ({}) as PromptReuse,
    plan: () => Promise.reject(new Error("the fakes plan themselves")),
    runtime: fleet.runtime,
  });
  const chat: ModelChoice = { kind: "path", name: "chat" };
  const embedChoice: ModelChoice = { kind: "path", name: embedName };
  const timers: Timer[] = [];
  const later = (fn: () => void, ms: number) => {
    // Called once: then it no longer counts as pending.
    const t: Timer = {
      fn: () => {
        t.cancelled = true;
        fn();
      },
      ms,
      cancelled: false,
    };
    timers.push(t);
    return () => {
      t.cancelled = true;
    };
  };
  const dir = tmpdir();
  const store = Store.open(dir.path);
  const job = new MemoryEmbedder({
    store,
    model: embedName,
    fingerprint: () => "m1",
    embed: (texts, s, spare) => embedWith(several, embedChoice, texts, s, undefined, undefined, spare),
    // The turn's own kick never fires here: each run after a turn is called by the test.
    settleMs: 3_600_000,
    later,
  });
  const state = (name: string) => several.scheduler.snapshot().models.find((m) => m.name === name)?.state;
  const pending = () => timers.filter((t) => !t.cancelled);
  const close = async () => {
    await job.stop();
    store.close();
    await several.stop();
    standIn.stop();
    dir[Symbol.dispose]();
  };
  return { fleet, several, chat, embedName, job, store, state, timers, pending, close };
}

/** A turn as methods/chat.ts runs it: the chat begins, its row is committed, it ends; the job runs after. */
async function turn(s: ReturnType<typeof setup>, text: string): Promise<void> {
  const ended = s.job.chatBegan();
  commitNotedTurn(s.store, "ann", "s", text);
  ended();
  await s.job.run();
}

/** The chat's model loaded on `gib`-GiB fakes and one turn run, then `body`; all stopped after. */
async function afterATurn(gib: number, body: (s: ReturnType<typeof setup>) => Promise<void>): Promise<void> {
  const s = setup(gib);
  try {
    await s.several.load(s.chat, { pin: undefined, signal: signal(), onProgress: () => {} });
    await turn(s, "I like cats");
    await body(s);
  } finally {
    await s.close();
  }
}

describe("memory's background job on a machine with room for one model", () => {
  test("two turns in a row leave the chat's model loaded; once chats are idle the rows get vectors", async () => {
    const warn = spyOn(logger, "warn");
    await afterATurn(6, async (s) => {
      await turn(s, "and dogs too");
      // Before the fix each run unloaded the chat's model (chat.save, chat.stop) to load the embedder.
      expect(s.fleet.log.filter((l) => l.startsWith("chat."))).toEqual(["chat.start"]);
      expect(s.state("chat")).toBe("loaded");
      // (A model loaded by path and not loaded has no row.)
      expect(s.fleet.log).not.toContain(`${s.embedName}.start`);
      expect(s.store.memory.vectors.counts("m1").embedded).toBe(0);
      // Not a failure: nothing logged, no back-off; one wait for chats to be idle.
      expect(warn).not.toHaveBeenCalled();
      const [wait, ...more] = s.pending();
      expect(more).toEqual([]);
      expect(wait?.ms).toBe(IDLE_BEFORE_TAKING_MS);
      wait?.fn();
      await s.job.run();
      // The room taken once: the chat's model unloaded (its KV saved) and both rows embedded.
      expect(s.store.memory.vectors.counts("m1")).toEqual({ embedded: 2, total: 2 });
      expect(s.fleet.log.filter((l) => l.startsWith("chat."))).toEqual([
        "chat.start",
        "chat.save",
        "chat.stop",
      ]);
      expect(s.state(s.embedName)).toBe("loaded");
      expect(warn).not.toHaveBeenCalled();
    }).finally(() => warn.mockRestore());
  });

  test("a chat beginning during the wait defers it until that chat ends", async () => {
    await afterATurn(6, async (s) => {
      const [first] = s.pending();
      const ended = s.job.chatBegan();
      expect(first?.cancelled).toBe(true);
      expect(s.pending()).toEqual([]);
      ended();
      const [again, ...more] = s.pending();
      expect(more).toEqual([]);
      expect(again?.ms).toBe(IDLE_BEFORE_TAKING_MS);
      expect(s.state("chat")).toBe("loaded");
    });
  });
});

describe("memory's background job granted the room", () => {
  test("gives it back to a chat that begins before its ask: the chat's model stays", async () => {
    await afterATurn(6, async (s) => {
      s.pending()[0]?.fn();
      // The granted run has begun (its fingerprint asked); a chat arrives before its embed.
      const ended = s.job.chatBegan();
      await s.job.run();
      expect(s.fleet.log.filter((l) => l.startsWith("chat."))).toEqual(["chat.start"]);
      expect(s.store.memory.vectors.counts("m1").embedded).toBe(0);
      expect(s.pending()).toEqual([]);
      ended();
      expect(s.pending().map((t) => t.ms)).toEqual([IDLE_BEFORE_TAKING_MS]);
    });
  });
});

describe("memory's background job where both models fit", () => {
  test("embeds after each turn as before: nothing unloaded, no wait", async () => {
    await afterATurn(4, async (s) => {
      expect(s.store.memory.vectors.counts("m1")).toEqual({ embedded: 1, total: 1 });
      expect(s.state("chat")).toBe("loaded");
      expect(s.state(s.embedName)).toBe("loaded");
      expect(s.pending()).toEqual([]);
    });
  });
});
