import { describe, expect, spyOn, test } from "bun:test";
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { SlotUse } from "../../../src/runtime/slot-use.ts";
import type { SupervisorSnapshot } from "../../../src/runtime/snapshot.ts";
import { CoreServices } from "../../../src/server/services.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { holdCommit } from "../../fixtures/hold-commit.ts";
import { b64, png } from "../../fixtures/images.ts";
import { writeFakeModel } from "../../fixtures/llama-stand-in/binary.ts";
import type { InProcessOptions } from "../../fixtures/llama-stand-in/in-process.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";
import { waitFor } from "../../fixtures/wait.ts";
import { ChatHarness, type Msg } from "../harness.ts";

// Prompt reuse against the in-process stand-in (docs/agent.md#prompt-reuse): a slot per session
// (`id_slot`), the least recently used giving way with its state saved first and restored when it
// returns, the save once the server is quiet, and each fault of a slot file falling back to
// processing the prompt — the chat's result as ever, only its `usage` shows the difference.

/** The quiet save's idle wait in the tests that wait for that save (2 s in production: it runs the same way, sooner). */
const QUIET_MS = 250;
/**
 * An idle wait no test reaches, for a test proving what a quiet save does NOT keep: it fires the
 * save itself once it arranged what the save must meet, and awaits it (`h.quietSave()`). Waiting
 * out a short wait instead, under load the save may not have run yet, or run before the arrangement.
 */
const FIRED_BY_TEST = 600_000;

type Usage = { prompt_tokens: number; cached_tokens: number };
const usage = (m: Msg) => (m.result as { usage: Usage }).usage;

/** A core whose stand-in has a real model file (the fingerprint reads it) and data_dir/kv as its slot folder. */
function harness(
  options: {
    slots?: number;
    standIn?: InProcessOptions;
    config?: Record<string, unknown>;
    /** The quiet save's idle wait (default 2 s): QUIET_MS where a test waits for it, FIRED_BY_TEST where it fires it. */
    quietMs?: number;
  } = {},
) {
  return new ChatHarness(
    { agents: [{ name: "a", system_prompt: "Be brief." }], memory: { enabled: false }, ...options.config },
    {
      slots: options.slots ?? 1,
      standIn: (dir) => {
        const kv = join(dir, "data", "kv");
        mkdirSync(kv, { recursive: true });
        return {
          modelPath: writeFakeModel(dir),
          slotSavePath: `${kv}/`,
          slots: options.slots ?? 1,
          unscripted: "echo",
          ...options.standIn,
        };
      },
      reuseQuietMs: options.quietMs,
    },
  );
}

/** The plan's --cache-ram, as the supervisor's snapshot says it. */
const withRamCache = (h: ChatHarness) =>
  Object.assign(h.provider, {
    snapshot: () => ({ state: "ready", sleep: "awake", cacheRamBytes: 2 ** 20 }) as SupervisorSnapshot,
  });
const kvFiles = (h: ChatHarness) => readdirSync(join(h.dataDir, "kv")).sort();
/** The saved states (the stand-in's slot files: a header line, then its tokens as JSON) whose tokens spell `text`. */
const statesHolding = (h: ChatHarness, text: string) =>
  kvFiles(h).filter((f) => {
    if (!f.endsWith(".bin")) return false;
    const json = readFileSync(join(h.dataDir, "kv", f), "utf8").split("\n")[1] ?? "{}";
    return ((JSON.parse(json) as { tokens?: string[] }).tokens ?? []).join("").includes(text);
  });
const slotActions = (h: ChatHarness, action: string) =>
  h.llama.log.filter((l) => l.includes(`action = ${action}`)).length;

let id = 0;
async function say(h: ChatHarness, session: string, input: string): Promise<Usage> {
  const { terminal } = await h.chat(++id, { session_id: session, input });
  expect(terminal.type).toBe("result");
  return usage(terminal);
}

/**
 * A session's state file and its sidecar in place, nothing under a temporary name: the save's
 * sidecar is synced off the event loop, so for a moment two temporary files are the folder's two.
 */
const pairInPlace = (h: ChatHarness) => {
  const files = kvFiles(h);
  return files.length === 2 && !files.some((f) => f.endsWith(".tmp"));
};

describe("prompt reuse with the stand-in", () => {
  test("a session keeps its slot: each of two sessions always names the same one (id_slot)", async () => {
    await using h = harness({ slots: 2 });
    for (const s of ["a", "b", "a", "b", "a"]) await say(h, s, `hello from ${s}`);
    const slotOf = (s: string) =>
      new Set(
        h.llama.requests
          .filter((r) => String(r.body.messages.at(-1)?.content).endsWith(`from ${s}`))
          .map((r) => r.body.id_slot),
      );
    expect(slotOf("a").size).toBe(1);
    expect(slotOf("b").size).toBe(1);
    expect([...slotOf("a")][0]).not.toBe([...slotOf("b")][0]);
    // And each turn after a session's first reuses its prefix.
    const third = await say(h, "b", "and again");
    expect(third.cached_tokens / third.prompt_tokens).toBeGreaterThan(0.6);
  });

  test("two sessions on one slot: the one giving way is saved first, and restored when it returns", async () => {
    await using h = harness({ standIn: { cacheRamMib: 0 } });
    await say(h, "a", "tell me about the sea and the waves");
    await say(h, "b", "tell me about mountains and rivers");
    // a changed since its last save: saved before b took the slot.
    expect(kvFiles(h).filter((f) => f.endsWith(".bin"))).toHaveLength(1);
    const back = await say(h, "a", "and the moon?");
    // No RAM cache (94b): what a reuses came from its file.
    expect(slotActions(h, "restore")).toBe(1);
    expect(back.cached_tokens / back.prompt_tokens).toBeGreaterThan(0.6);
    expect(kvFiles(h).filter((f) => f.endsWith(".bin"))).toHaveLength(2);
  });

  test("a session taking a slot looks for its saved state once, and its record is what it restored", async () => {
    await using h = harness({ standIn: { cacheRamMib: 0 } });
    await say(h, "a", "tell me about the sea and the waves");
    const looks = spyOn(KvDisk.prototype, "entry");
    try {
      // b is new: nothing on disk, looked for once (docs/performance.md, "The session in one write").
      await say(h, "b", "tell me about mountains and rivers");
      expect(looks).toHaveBeenCalledTimes(1);
      looks.mockClear();
      // a comes back from its file: one look, and the prompt laid out as the restored state holds it.
      const back = await say(h, "a", "and the moon?");
      expect(looks).toHaveBeenCalledTimes(1);
      expect(slotActions(h, "restore")).toBe(1);
      expect(back.cached_tokens / back.prompt_tokens).toBeGreaterThan(0.6);
    } finally {
      looks.mockRestore();
    }
  });

  test("with llama-server's RAM cache, the session giving way is left to it: nothing on the taking turn's path", async () => {
    await using h = harness({ quietMs: 1000 });
    withRamCache(h);
    await say(h, "a", "tell me about the sea and the waves");
    await say(h, "b", "tell me about mountains and rivers");
    const back = await say(h, "a", "and the moon?");
    // Neither a save nor a restore between the turns: the RAM cache gave a its prefix back (94).
    expect(slotActions(h, "save") + slotActions(h, "restore")).toBe(0);
    expect(back.cached_tokens / back.prompt_tokens).toBeGreaterThan(0.6);
    // Once quiet, the holder is saved as ever.
    expect(await waitFor(() => pairInPlace(h), { timeoutMs: 5000 })).toBe(true);
  });

  test("with the RAM cache, sessions that gave way and never came back are not remembered without bound", async () => {
    await using h = harness({ config: { llama: { kv_disk_bytes: 0 } } });
    withRamCache(h);
    // Each new session takes the one slot; the one giving way is left to the RAM cache.
    for (let i = 0; i < 600; i++) await say(h, `s${i}`, "hi");
    const inRam = (h.services.promptReuse() as unknown as { inRam: Map<string, string> }).inRam;
    expect(inRam.size).toBeLessThanOrEqual(512);
    expect([...inRam.keys()].at(-1)).toEndWith("s598");
  }, 60_000);

  test("a turn taking a slot the quiet save has yet to reach goes on: that save is not queued behind it", async () => {
    // x in slot 0, y in slot 1, both changed; x's save (the first) held while t takes y's slot.
    // The quiet save then queued y's save behind t's hand-over, which waited on that save: t hung.
    await using h = harness({ slots: 2, quietMs: FIRED_BY_TEST });
    for (const s of ["x", "y", "x"]) await say(h, s, `hello from ${s}`);
    let answered = false;
    const took = spyOn(SlotUse.prototype, "take");
    try {
      using save = holdCommit();
      const quiet = h.quietSave();
      expect(await waitFor(save.held, { timeoutMs: 5000 })).toBe(true);
      void say(h, "t", "something else entirely").then(() => {
        answered = true;
      });
      // t took its slot (its hand-over is queued behind x's save) before the save is let go.
      expect(await waitFor(() => took.mock.calls.some(([k]) => k.endsWith("/t")), { timeoutMs: 5000 })).toBe(
        true,
      );
      save.open();
      expect(await waitFor(() => answered, { timeoutMs: 5000 })).toBe(true);
      await quiet;
    } finally {
      took.mockRestore();
    }
  });

  test("a quiet save that found the server busy is set again when the lease holding it ends without a slot", async () => {
    // The turn holding the server sets the save again as it ends; one that ends before it took a
    // slot (cancelled while /props did not answer, refused for images) set none: the change stayed
    // unsaved until some later turn, and an idle sleep (every slot emptied) or a killed core lost it.
    await using h = harness({ quietMs: FIRED_BY_TEST });
    await say(h, "a", "a first question");
    // b's turn holds the server's lease, waiting for its /props, before it takes a slot.
    const asked = Promise.withResolvers<void>();
    const props = spyOn(h.provider.launch, "props").mockImplementation((signal: AbortSignal) => {
      asked.resolve();
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
    });
    try {
      h.send("b1", "chat", { session_id: "b", input: "a second question" });
      await asked.promise;
      // a's quiet save comes now: the server is busy, nothing is saved.
      await h.quietSave();
      expect(kvFiles(h)).toEqual([]);
      h.send("k", "cancel", { request_id: "b1" });
      expect(await h.terminal("b1")).toMatchObject({ type: "error", code: "cancelled" });
    } finally {
      props.mockRestore();
    }
    // The server is quiet again: a's change is saved.
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
  });

  test("saved once the server is quiet, owner-only; nothing left under a temporary name", async () => {
    await using h = harness({ quietMs: QUIET_MS });
    await say(h, "q", "a first question");
    expect(await waitFor(() => pairInPlace(h), { timeoutMs: 5000 })).toBe(true);
    expect(kvFiles(h).some((f) => f.endsWith(".tmp"))).toBe(false);
  });

  test("the save before an unload: done once llama-server wrote the file, the sidecar kept right after", async () => {
    await using h = harness();
    await say(h, "u", "a question before the unload");
    const reuse = h.services.promptReuse();
    await reuse.saveBeforeUnload();
    // The server may stop now (scheduler.ts): the file is written, only the core's part is left.
    expect(kvFiles(h).filter((f) => f.endsWith(".tmp"))).toHaveLength(1);
    expect(await waitFor(() => pairInPlace(h), { timeoutMs: 5000 })).toBe(true);
    expect(kvFiles(h).some((f) => f.endsWith(".tmp"))).toBe(false);
    // Asked of llama-server once.
    expect(slotActions(h, "save")).toBe(1);
  });

  test("the save before an unload keeps its sidecar only once the server has stopped", async () => {
    // Beside the exit, the sidecar's fsyncs slowed it by 5–10 ms (docs/performance.md "The swap,
    // fourth pass"): the core's part waits for the stop the scheduler reports.
    await using h = harness();
    await say(h, "w", "a question before a later unload");
    const reuse = h.services.promptReuse();
    const stopped = Promise.withResolvers<void>();
    const commits = spyOn(KvDisk.prototype, "commit");
    try {
      await reuse.saveBeforeUnload(stopped.promise);
      expect(slotActions(h, "save")).toBe(1);
      // A keep not waiting for the stop calls commit in the microtasks after the unload's save:
      // all run before a timer's turn.
      await Bun.sleep(0);
      expect(commits).not.toHaveBeenCalled();
      expect(kvFiles(h).filter((f) => f.endsWith(".tmp"))).toHaveLength(1);
      expect(pairInPlace(h)).toBe(false);
      stopped.resolve();
      expect(await waitFor(() => pairInPlace(h), { timeoutMs: 5000 })).toBe(true);
      expect(commits).toHaveBeenCalledTimes(1);
    } finally {
      commits.mockRestore();
    }
    expect(kvFiles(h).some((f) => f.endsWith(".tmp"))).toBe(false);
  });

  test("users.delete while a session's first save waits for the stop: its temporary file goes before the answer", async () => {
    // A first save has no sidecar yet, the only way removeUser found a session's files: its
    // temporary file (the conversation's tokens) stayed past the delete's answer until the stop.
    await using h = harness();
    await say(h, "first", "my code word is ORYX-5521");
    const stopped = Promise.withResolvers<void>();
    await h.services.promptReuse().saveBeforeUnload(stopped.promise);
    expect(kvFiles(h).filter((f) => f.endsWith(".tmp"))).toHaveLength(1);
    h.send("d", "users.delete", { user_id: "default_user" });
    expect((await h.terminal("d")).type).toBe("result");
    expect(kvFiles(h)).toEqual([]);
    stopped.resolve();
    await Bun.sleep(0);
    expect(kvFiles(h)).toEqual([]);
  });

  test("a file cut short: the restore fails, the prompt is processed, the file goes", async () => {
    await using h = harness({ standIn: { cacheRamMib: 0 } });
    await say(h, "a", "tell me about the sea and the waves");
    await say(h, "b", "tell me about mountains");
    const bin = kvFiles(h).find((f) => f.endsWith(".bin")) as string;
    truncateSync(join(h.dataDir, "kv", bin), 40);
    const back = await say(h, "a", "and the moon?");
    expect(back.cached_tokens / back.prompt_tokens).toBeLessThan(0.3);
    expect(kvFiles(h)).not.toContain(bin);
  });

  test("a file deleted between its save and its restore: the prompt is processed, no restore asked", async () => {
    await using h = harness({ standIn: { cacheRamMib: 0 } });
    await say(h, "a", "tell me about the sea and the waves");
    await say(h, "b", "tell me about mountains");
    for (const f of kvFiles(h)) if (f.endsWith(".bin")) rmSync(join(h.dataDir, "kv", f));
    const restores = slotActions(h, "restore");
    const back = await say(h, "a", "and the moon?");
    expect(back.prompt_tokens).toBeGreaterThan(0);
    expect(slotActions(h, "restore")).toBe(restores);
  });

  test("a directory where a session's state file belongs: every chat of it still answers, the prompt processed", async () => {
    await using h = harness({ standIn: { cacheRamMib: 0 } });
    await say(h, "a", "tell me about the sea and the waves");
    await say(h, "b", "tell me about mountains");
    for (const f of kvFiles(h)) {
      if (!f.endsWith(".bin")) continue;
      rmSync(join(h.dataDir, "kv", f));
      mkdirSync(join(h.dataDir, "kv", f, "inside"), { recursive: true });
    }
    for (const input of ["and the moon?", "and the stars?"]) {
      const back = await say(h, "a", input);
      expect(back.prompt_tokens).toBeGreaterThan(0);
      await say(h, "b", `and ${input}`);
    }
    expect(kvFiles(h).filter((f) => f.endsWith(".bin")).length).toBe(2);
  });

  test("a full disk while saving: the chat goes on, the last good file stays, no temporary file", async () => {
    await using h = harness({ standIn: { cacheRamMib: 0, slotFiles: { saveFails: true } } });
    await say(h, "a", "tell me about the sea");
    const r = await say(h, "b", "tell me about mountains");
    expect(r.prompt_tokens).toBeGreaterThan(0);
    expect(kvFiles(h)).toEqual([]);
    expect(h.llama.log.some((l) => l.includes("No space left on device"))).toBe(true);
  });

  test("llama.kv_disk_bytes 0: slots are still kept per session, nothing is saved", async () => {
    await using h = harness({ config: { llama: { kv_disk_bytes: 0 } } });
    await say(h, "a", "one");
    await say(h, "b", "two");
    await say(h, "a", "three");
    // No quiet save is set without a disk; the save an unload or a stop makes asks for none either.
    expect(h.quietSaves).toEqual([]);
    await h.services.promptReuse().saveBeforeUnload();
    expect(slotActions(h, "save")).toBe(0);
    expect(kvFiles(h)).toEqual([]);
    expect(h.llama.requests.every((r) => r.body.id_slot === 0)).toBe(true);
  });

  test("sessions.delete takes the session's files, and a quiet save does not bring them back", async () => {
    await using h = harness({ quietMs: FIRED_BY_TEST });
    await say(h, "gone", "remember this");
    h.send("d", "sessions.delete", { session_id: "gone" });
    expect((await h.terminal("d")).result).toEqual({ deleted: true, set_aside_copies: [] });
    await h.quietSave();
    expect(slotActions(h, "save")).toBe(0);
    expect(kvFiles(h)).toEqual([]);
  });

  test("sessions.delete empties its slot in llama-server, so the next session's turn puts nothing of it in the RAM cache", async () => {
    await using h = harness();
    await say(h, "gone", "my code word is ORYX-5521");
    const kv = h.llama.model.kv;
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    h.send("d", "sessions.delete", { session_id: "gone" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    // The erase (POST /slots/0?action=erase, 93b) lands off the delete's way.
    expect(await waitFor(() => kv.slots[0]?.tokens.length === 0, { timeoutMs: 5000 })).toBe(true);
    await say(h, "next", "something else entirely, at some length");
    expect(kv.ram.flat().join("")).not.toContain("ORYX-5521");
    expect(kv.slots[0]?.tokens.join("")).not.toContain("ORYX-5521");
  });

  test("sessions.delete empties a slot another session took before llama-server took up a request of it: no copy more reaches the RAM cache", async () => {
    await using h = harness();
    withRamCache(h);
    await say(h, "gone", "my code word is ORYX-5521");
    const kv = h.llama.model.kv;
    const copies = () => kv.ram.filter((t) => t.join("").includes("ORYX-5521")).length;
    // b takes the slot, and its request is refused as too long: llama-server picked the slot
    // first, so the RAM cache took a copy of gone's prompt while gone lived (not covered,
    // docs/agent.md), and the slot still holds it, its tokens not cut.
    h.llama.script({ overflow: true });
    const { terminal } = await h.chat(++id, { session_id: "b", input: "a very long paste" });
    expect(terminal).toMatchObject({ type: "error", data: { reason: "context_overflow" } });
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    expect(copies()).toBe(1);
    h.send("d", "sessions.delete", { session_id: "gone" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    // The erase (POST /slots/0?action=erase, 93b) lands off the delete's way.
    expect(await waitFor(() => kv.slots[0]?.tokens.length === 0, { timeoutMs: 5000 })).toBe(true);
    await say(h, "next", "something else entirely, at some length");
    expect(copies()).toBe(1);
    expect(kv.slots[0]?.tokens.join("")).not.toContain("ORYX-5521");
  });

  test("sessions.delete empties a slot holding its restored state, handed on by two turns llama-server never took up", async () => {
    await using h = harness();
    const kv = h.llama.model.kv;
    await say(h, "gone", "my code word is ORYX-5521");
    await say(h, "a", "tell me about the sea");
    // gone comes back: its state is restored from disk (a saved as it gives way); its request
    // fails before any task started. Then c takes the slot, its request failing the same way.
    for (const session of ["gone", "c"]) {
      h.llama.script({ error: { status: 500, message: "boom" } });
      expect((await h.chat(++id, { session_id: session, input: "and now?" })).terminal.type).toBe("error");
    }
    expect(slotActions(h, "restore")).toBe(1);
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    h.send("d", "sessions.delete", { session_id: "gone" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    expect(
      await waitFor(() => !kv.slots[0]?.tokens.join("").includes("ORYX-5521"), { timeoutMs: 5000 }),
    ).toBe(true);
  });

  test("a turn whose setup fails after it took its slot gives the slot back: the next turn names it", async () => {
    await using h = harness({ standIn: { vision: { tokensPerImage: 64 }, nCtx: 8192 } });
    const seen = await h.chat(++id, { session_id: "s", input: "see", images: [{ data: b64(png(8, 8)) }] });
    expect(seen.terminal.type).toBe("result");
    // The next turn reads the history's image counts once it has its slot: the database fails.
    const tokens = spyOn(h.services.store().conversations.attachments, "tokens").mockImplementationOnce(
      () => {
        throw new Error("disk I/O error");
      },
    );
    expect((await h.chat(++id, { session_id: "s", input: "and?" })).terminal.type).toBe("error");
    expect(tokens).toHaveBeenCalled();
    tokens.mockRestore();
    await say(h, "s", "again?");
    expect(h.llama.requests.at(-1)?.body.id_slot).toBe(0);
  });

  /** A pull updating the model where it is (a rename: another inode), while llama-server runs on the old. */
  const replaceModel = (h: ChatHarness) => {
    const model = h.llama.model.options.modelPath;
    writeFileSync(`${model}.new`, readFileSync(model));
    renameSync(`${model}.new`, model);
  };

  test("a model file replaced after llama-server loaded it, before any chat: nothing is saved as the new file's", async () => {
    await using h = harness({ quietMs: FIRED_BY_TEST });
    replaceModel(h);
    await say(h, "a", "tell me about the sea");
    await h.quietSave();
    expect(kvFiles(h)).toEqual([]);
  });

  test("a model file replaced after a save: the state is not restored (the server may have re-read it)", async () => {
    await using h = harness({ quietMs: QUIET_MS, standIn: { cacheRamMib: 0 } });
    await say(h, "a", "tell me about the sea and the waves");
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    replaceModel(h);
    await say(h, "b", "tell me about mountains");
    await say(h, "a", "and the moon?");
    expect(slotActions(h, "restore")).toBe(0);
  });

  test("a session a second core erased is not saved by this one's quiet save", async () => {
    // The quiet save fired once the second store's erase has ended: what this core's save meets.
    await using h = harness({ quietMs: FIRED_BY_TEST });
    await say(h, "gone", "remember this");
    const other = Store.open(h.dataDir);
    try {
      expect((await other.deleteSession("default_user", "gone")).deleted).toBe(true);
    } finally {
      other.close();
    }
    await h.quietSave();
    expect(kvFiles(h)).toEqual([]);
  });
});

describe("an erased document in other sessions' saved state", () => {
  const MARK = "QUAGGA-7731";
  /** The document's own words: in a prompt only as the memory note quoting it. */
  const PASSAGE = "subspecies of zebra";
  const withMemory = { config: { memory: { enabled: true, top_k: 5 } } };

  /**
   * A library document whose passage z's first turn recalls; its request reaches the slot, which
   * then holds it, and the turn is cancelled before the reply ends: nothing is committed, the slot is as sent.
   */
  async function cancelledQuoting(h: ChatHarness): Promise<string> {
    h.send("add", "documents.add", { text: `# Zebras\n\nThe ${MARK} was a ${PASSAGE}.`, name: "z.md" });
    const doc = ((await h.terminal("add")).result as { document_id: string }).document_id;
    h.llama.script({ content: ["a"], hang: true });
    h.send("z", "chat", { session_id: "z", input: `tell me about the ${MARK}` });
    // Once the core heard the request taken up (its first token), not when the stand-in's slot
    // holds it: on a loaded box the cancel then raced llama-server's answer (b's test below).
    await h.waitFor((m) => m.id === "z" && m.event === "llm_chunk", 5000);
    expect(h.llama.model.kv.slots[0]?.tokens.join("")).toContain(PASSAGE);
    h.send("c", "cancel", { request_id: "z" });
    expect(JSON.stringify(await h.terminal("z"))).toContain("cancelled");
    return doc;
  }

  /**
   * z's state is saved quietly (the save its last turn set, fired and awaited), its tokens
   * holding the passage; the document's delete takes it.
   */
  async function savedThenDeleted(h: ChatHarness, doc: string): Promise<void> {
    await h.quietSave();
    expect(pairInPlace(h) && statesHolding(h, PASSAGE).length === 1).toBe(true);
    h.send("d", "documents.delete", { document_id: doc });
    expect((await h.terminal("d")).result).toEqual({ deleted: true });
    expect(statesHolding(h, PASSAGE)).toEqual([]);
  }

  /** A library document recalled into session z's prompt (a memory note), z's state saved quietly. */
  async function recalled(h: ChatHarness, saved = true): Promise<string> {
    // Scripted replies: the echo would put the note into the history, which is not what is tested.
    h.llama.script({ content: ["ok"] });
    h.send("add", "documents.add", { text: `# Zebras\n\nThe ${MARK} was a ${PASSAGE}.`, name: "z.md" });
    const added = (await h.terminal("add")).result as { document_id: string };
    await say(h, "z", `tell me about the ${MARK}`);
    if (!saved) return added.document_id;
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    // The setup holds: z's sidecar quotes the passage.
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE).length).toBeGreaterThan(0);
    return added.document_id;
  }

  test("documents.delete takes them: no file holds it, a quiet save does not bring it back, z's next prompt lacks it", async () => {
    await using h = harness({ ...withMemory, quietMs: FIRED_BY_TEST });
    const doc = await recalled(h);
    h.send("d", "documents.delete", { document_id: doc });
    expect((await h.terminal("d")).result).toEqual({ deleted: true });
    expect(kvFiles(h)).toEqual([]);
    await say(h, "z", "and what else?");
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).not.toContain(PASSAGE);
    // z's state is saved again, without the note.
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE)).toEqual([]);
  }, 20_000);

  test("a save under way when the document goes is not kept; its temporary file goes before the answer", async () => {
    await using h = harness({ quietMs: FIRED_BY_TEST, ...withMemory, standIn: { cacheRamMib: 0 } });
    // z's first save is the one under way: no sidecar of z names the document yet.
    const doc = await recalled(h, false);
    // b takes the only slot: z, changed, is saved first; the delete lands before it is kept.
    {
      using save = holdCommit();
      const b = say(h, "b", "something else entirely");
      expect(await waitFor(save.held, { timeoutMs: 5000 })).toBe(true);
      h.send("d", "documents.delete", { document_id: doc });
      expect((await h.terminal("d")).result).toEqual({ deleted: true });
      // No sidecar names what a first save quotes, by which removeSource found a session: the
      // delete answered with z's temporary file, the passage in its tokens, still on disk.
      const tokens = (f: string) => readFileSync(join(h.dataDir, "kv", f), "utf8").split("\n")[1] ?? "{}";
      const holding = kvFiles(h).filter((f) =>
        (JSON.parse(tokens(f)).tokens ?? []).join("").includes(PASSAGE),
      );
      expect(holding).toEqual([]);
      save.open();
      await b;
    }
    // b's quiet save: b's state and sidecar, none holding the passage.
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE)).toEqual([]);
  }, 20_000);

  test("a turn under way when the document goes keeps no record of it: not saved, not sent again", async () => {
    await using h = harness({ ...withMemory, quietMs: FIRED_BY_TEST });
    const doc = await recalled(h);
    h.llama.script({ content: ["a", " slow", " reply"] });
    // The delete is answered while the turn's request waits at the stand-in, before its reply.
    h.llama.beforeChat = async () => {
      h.llama.beforeChat = undefined;
      h.send("d", "documents.delete", { document_id: doc });
      await h.terminal("d");
    };
    const turn = await h.chat(++id, { session_id: "z", input: "say more" });
    expect((await h.terminal("d")).result).toEqual({ deleted: true });
    expect(turn.terminal.type).toBe("result");
    await h.quietSave();
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE)).toEqual([]);
    await say(h, "z", "and what else?");
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).not.toContain(PASSAGE);
  }, 20_000);

  test("a turn that first recalls the document when it goes: its slot is emptied in llama-server once the turn ends", async () => {
    await using h = harness(withMemory);
    h.send("add", "documents.add", { text: `# Zebras\n\nThe ${MARK} was a ${PASSAGE}.`, name: "z.md" });
    const doc = ((await h.terminal("add")).result as { document_id: string }).document_id;
    // z has no record yet: only this turn's prompt quotes the document.
    h.llama.script({ content: ["a", " slow", " reply"] });
    // The delete is answered while the turn's request, its prompt quoting the passage, waits at
    // the stand-in, before its reply.
    h.llama.beforeChat = async () => {
      h.llama.beforeChat = undefined;
      h.send("d", "documents.delete", { document_id: doc });
      await h.terminal("d");
    };
    const turn = await h.chat(++id, { session_id: "z", input: `tell me about the ${MARK}` });
    expect(h.llama.requests).toHaveLength(1);
    expect(JSON.stringify(h.llama.requests[0]?.body.messages)).toContain(PASSAGE);
    expect((await h.terminal("d")).result).toEqual({ deleted: true });
    expect(turn.terminal.type).toBe("result");
    const kv = h.llama.model.kv;
    expect(await waitFor(() => !kv.slots[0]?.tokens.join("").includes(PASSAGE), { timeoutMs: 5000 })).toBe(
      true,
    );
    await say(h, "next", "something else entirely, at some length");
    expect(kv.ram.flat().join("")).not.toContain(PASSAGE);
  }, 20_000);
  test("a turn cancelled after its request quoted the document: its saved state is taken by the delete", async () => {
    await using h = harness({ ...withMemory, quietMs: QUIET_MS });
    const doc = await cancelledQuoting(h);
    const kv = h.llama.model.kv;
    // The quiet save keeps the slot's state, which holds the passage.
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    expect(statesHolding(h, PASSAGE)).toHaveLength(1);
    h.send("d", "documents.delete", { document_id: doc });
    expect((await h.terminal("d")).result).toEqual({ deleted: true });
    expect(statesHolding(h, PASSAGE)).toEqual([]);
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE)).toEqual([]);
    // And the slot no longer holds it for the RAM cache to take.
    expect(await waitFor(() => !kv.slots[0]?.tokens.join("").includes(PASSAGE), { timeoutMs: 5000 })).toBe(
      true,
    );
  }, 20_000);
  test("a turn refused after its request quoted the document (its free step read, the schema then refused): the delete takes its state", async () => {
    // With tools the free step's request reaches the slot with the note; llama-server's converter
    // then refuses the constrained step's schema (95d's words). A schema the core's validator
    // cannot compile no longer gets this far: it is refused before the first step.
    const agents = [{ name: "a", system_prompt: "Be brief.", tools: ["t.*"] }];
    await using h = harness({ quietMs: QUIET_MS, config: { ...withMemory.config, agents } });
    h.send("add", "documents.add", { text: `# Zebras\n\nThe ${MARK} was a ${PASSAGE}.`, name: "z.md" });
    const doc = ((await h.terminal("add")).result as { document_id: string }).document_id;
    await say(h, "z", "hello there");
    const refused = "JSON schema conversion failed:\nUnsupported ref: #/x";
    h.llama.script({ content: ["ok"] }, { error: { status: 400, message: refused } });
    const format = { type: "json_schema", schema: { type: "object" } };
    const input = `tell me about the ${MARK}`;
    const { terminal } = await h.chat(++id, { session_id: "z", input, response_format: format });
    expect(terminal).toMatchObject({ code: "invalid_request", data: { field: "response_format" } });
    expect(h.llama.model.kv.slots[0]?.tokens.join("")).toContain(PASSAGE);
    await savedThenDeleted(h, doc);
  }, 20_000);
  test("an edit whose request llama-server refused before reading it: the replaced message's note stays held", async () => {
    await using h = harness({ ...withMemory, quietMs: QUIET_MS });
    const doc = await recalled(h);
    // The edit replaces the message the note came with, recalls nothing, and its request is
    // answered with an error: the slot still holds the old prompt, note and all, and is saved again.
    h.llama.script({ error: { status: 500, message: "boom" } });
    const { terminal } = await h.chat(++id, { session_id: "z", replace_from: 0, input: "hello there" });
    expect(terminal.type).toBe("error");
    expect(h.llama.model.kv.slots[0]?.tokens.join("")).toContain(PASSAGE);
    await h.quietSave();
    expect(slotActions(h, "save")).toBe(2);
    await savedThenDeleted(h, doc);
  }, 20_000);
  test("a held note stays held past a request llama-server refused before reading it: the delete takes the state", async () => {
    await using h = harness({ ...withMemory, quietMs: QUIET_MS });
    const doc = await cancelledQuoting(h);
    const kv = h.llama.model.kv;
    // The next turn recalls nothing; its request is answered with an error, the slot untouched.
    h.llama.script({ error: { status: 500, message: "boom" } });
    const { terminal } = await h.chat(++id, { session_id: "z", input: "hello there" });
    expect(terminal.type).toBe("error");
    expect(kv.slots[0]?.tokens.join("")).toContain(PASSAGE);
    await savedThenDeleted(h, doc);
  }, 20_000);
});

describe("an erased session in another session's saved state", () => {
  /** `session`'s state is saved (nothing under a temporary name), its tokens spelling `text`. */
  const stateOf = (h: ChatHarness, session: string, text: string) =>
    !kvFiles(h).some((f) => f.endsWith(".tmp")) &&
    statesHolding(h, text).includes(
      `${new KvDisk(join(h.dataDir, "kv"), 0).nameOf("default_user", session)}.bin`,
    );

  test("sessions.delete of a takes b's state, whose notes quote a's turn, from slot and disk", async () => {
    await using h = harness({ quietMs: QUIET_MS, config: { memory: { enabled: true, top_k: 5 } } });
    const WORDS = "the lighthouse keeper GANNET-4410 hums";
    h.llama.script({ content: ["noted"] }, { content: ["ok"] });
    await say(h, "a", `remember that ${WORDS}`);
    await say(h, "b", "what does the GANNET-4410 keeper do?");
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).toContain(WORDS);
    const kv = h.llama.model.kv;
    await h.quietSave(); // b's, as its turn set it
    expect(stateOf(h, "b", WORDS)).toBe(true);
    h.send("d", "sessions.delete", { session_id: "a" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    expect(statesHolding(h, WORDS)).toEqual([]);
    expect(filesHolding(join(h.dataDir, "kv"), WORDS)).toEqual([]);
    const held = () => kv.slots.some((s) => s.tokens.join("").includes(WORDS));
    expect(await waitFor(() => !held(), { timeoutMs: 5000 })).toBe(true);
  }, 20_000);

  test("b's request refused before llama-server took it up: a's tokens left in the slot are not saved as b's", async () => {
    await using h = harness();
    withRamCache(h);
    await say(h, "b", "hello there");
    await say(h, "a", "my code word is ORYX-5521");
    // b takes the slot back (a left to the RAM cache, b's own prefix there: nothing restored);
    // its request is answered with an error before any task started: the slot still holds a's prompt.
    h.llama.script({ error: { status: 500, message: "boom" } });
    const { terminal } = await h.chat(++id, { session_id: "b", input: "and now?" });
    expect(terminal.type).toBe("error");
    expect(h.llama.model.kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    // What changed is saved (as when quiet): a's tokens must not land in a file named for b,
    // which a delete of a would never find.
    await h.services.promptReuse().saveBeforeUnload();
    h.send("d", "sessions.delete", { session_id: "a" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    expect(filesHolding(join(h.dataDir, "kv"), "ORYX-5521")).toEqual([]);
  }, 20_000);

  test("a slot b's refused request filled from the RAM cache, handed on unread: sessions.delete of b empties it", async () => {
    await using h = harness();
    withRamCache(h);
    await say(h, "b", "my code word is ORYX-5521");
    await say(h, "a", "tell me about the sea and the waves");
    const kv = h.llama.model.kv;
    // b takes the slot back; its request is refused as too long, after llama-server picked the
    // slot: a's prompt went to the RAM cache, b's own came back from there (get_available_slot).
    h.llama.script({ overflow: true }, { overflow: true }); // the retry without its history too
    expect((await h.chat(++id, { session_id: "b", input: "a very long paste" })).terminal.type).toBe("error");
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    // c takes it, refused too: the slot still holds b's tokens.
    h.llama.script({ overflow: true });
    expect((await h.chat(++id, { session_id: "c", input: "another long paste" })).terminal.type).toBe(
      "error",
    );
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    h.send("d", "sessions.delete", { session_id: "b" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    // The erase (POST /slots/0?action=erase, 93b) lands off the delete's way.
    expect(await waitFor(() => kv.slots[0]?.tokens.length === 0, { timeoutMs: 5000 })).toBe(true);
  }, 20_000);

  test("a slot b took from a, unread: an edit of a in another slot empties it of a's replaced tail", async () => {
    await using h = harness({ slots: 2 });
    withRamCache(h);
    await say(h, "a", "my code word is ORYX-5521");
    await say(h, "u", "tell me about the sea and the waves");
    const kv = h.llama.model.kv;
    // b takes a's slot (the least recently used); its request fails before llama-server took it
    // up: the slot still holds a's prompt.
    h.llama.script({ error: { status: 500, message: "boom" } });
    expect((await h.chat(++id, { session_id: "b", input: "hello there" })).terminal.type).toBe("error");
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    // a's edit replaces the code word; it runs in the other slot (u's, now the least recently used).
    const { terminal } = await h.chat(++id, { session_id: "a", replace_from: 0, input: "hi again" });
    expect(terminal.type).toBe("result");
    const held = (t: string[]) => t.join("").includes("ORYX-5521");
    expect(held(kv.slots[1]?.tokens ?? [])).toBe(false);
    expect(kv.ram.some(held)).toBe(false);
    // b's next turn would hand what its slot holds to the RAM cache: the replaced tail must be gone.
    await say(h, "b", "something else entirely");
    expect(kv.slots.some((s) => held(s.tokens))).toBe(false);
    expect(kv.ram.some(held)).toBe(false);
  }, 20_000);

  test("the same for a stopped turn of a that a's next chat sets aside", async () => {
    await using h = harness({ slots: 2 });
    withRamCache(h);
    const kv = h.llama.model.kv;
    const held = (t: string[]) => t.join("").includes("ORYX-5521");
    h.llama.script({ content: ["a"], hang: true });
    h.send("s", "chat", { session_id: "a", input: "my code word is ORYX-5521" });
    // Cancelled once the core heard the request taken up, as b's below.
    await h.waitFor((m) => m.id === "s" && m.event === "llm_chunk", 5000);
    expect(held(kv.slots[0]?.tokens ?? [])).toBe(true);
    h.send("c", "cancel", { request_id: "s" });
    expect(JSON.stringify(await h.terminal("s"))).toContain("cancelled");
    await say(h, "u", "tell me about the sea and the waves");
    h.llama.script({ error: { status: 500, message: "boom" } });
    expect((await h.chat(++id, { session_id: "b", input: "hello there" })).terminal.type).toBe("error");
    expect(held(kv.slots[0]?.tokens ?? [])).toBe(true);
    // a's next chat sets the stopped turn aside, in u's slot; its words were never the conversation's.
    await say(h, "a", "hi again");
    expect(h.history("a").some((m) => String(m.content).includes("ORYX-5521"))).toBe(false);
    expect(kv.ram.some(held)).toBe(false);
    await say(h, "b", "something else entirely");
    expect(kv.slots.some((s) => held(s.tokens))).toBe(false);
    expect(kv.ram.some(held)).toBe(false);
  }, 20_000);

  test("the same when b's turn quoting a was cancelled after its request", async () => {
    await using h = harness({ quietMs: QUIET_MS, config: { memory: { enabled: true, top_k: 5 } } });
    const WORDS = "the lighthouse keeper GANNET-4410 hums";
    h.llama.script({ content: ["noted"] }, { content: ["a"], hang: true });
    await say(h, "a", `remember that ${WORDS}`);
    h.send("b", "chat", { session_id: "b", input: "what does the GANNET-4410 keeper do?" });
    const kv = h.llama.model.kv;
    const held = () => kv.slots.some((s) => s.tokens.join("").includes(WORDS));
    // The cancel comes once the core heard llama-server take b's request up (its 2xx, then the
    // first token): cancelled before that, the slot counts as still holding a's tokens and is not
    // saved as b's (docs/agent.md#prompt-reuse). Waiting for the stand-in's slot instead raced
    // that answer: on a loaded box the cancel won, and b's state was never saved.
    await h.waitFor((m) => m.id === "b" && m.event === "llm_chunk", 5000);
    // b's prompt in the slot: its note (a's words) and its own question (a's prompt has the words too).
    const bSent = (s: { tokens: string[] }) =>
      s.tokens.join("").includes(WORDS) && s.tokens.join("").includes("keeper do?");
    expect(kv.slots.some(bSent)).toBe(true);
    h.send("c", "cancel", { request_id: "b" });
    expect(JSON.stringify(await h.terminal("b"))).toContain("cancelled");
    // b's own state is saved by the quiet save its end set (fired now, awaited), its tokens
    // holding a's words (its note).
    await h.quietSave();
    expect(stateOf(h, "b", WORDS)).toBe(true);
    h.send("d", "sessions.delete", { session_id: "a" });
    expect((await h.terminal("d")).result).toMatchObject({ deleted: true });
    expect(statesHolding(h, WORDS)).toEqual([]);
    expect(await waitFor(() => !held(), { timeoutMs: 5000 })).toBe(true);
  }, 20_000);
});

describe("a memory folder's file gone or changed, in the saved state quoting it", () => {
  const MARK = "OKAPI-5521";
  /** The file's own words: in a prompt only as the memory note quoting it. */
  const PASSAGE = "giraffe of the forest";

  /**
   * Session z recalls the folder's file (a memory note) and its state is saved quietly; then the
   * core stops, `change` is made to the folder, and the next core opens the same data_dir, which
   * indexes the folder again (store/folder-index.ts): what is left under data_dir/kv.
   */
  async function afterRestart(change: (file: string) => void): Promise<string[]> {
    using notes = tmpdir("local-ai-notes-");
    const file = join(notes.path, "okapi.md");
    writeFileSync(file, `# Okapis\n\nThe ${MARK} is a ${PASSAGE}.\n`);
    await using h = harness({
      quietMs: QUIET_MS,
      config: { memory: { enabled: true, top_k: 5, folders: [notes.path] } },
    });
    h.llama.script({ content: ["ok"] });
    await say(h, "z", `tell me about the ${MARK}`);
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).toContain(PASSAGE);
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE).length).toBeGreaterThan(0);
    await h.services.stop();
    change(file);
    const next = new CoreServices({ configPath: join(h.dir.path, "config.yaml"), cwd: h.dir.path });
    try {
      await next.store().folderIndex.start();
      return filesHolding(join(h.dataDir, "kv"), PASSAGE);
    } finally {
      await next.stop();
    }
  }

  test("a file removed: no saved state quotes it once the next core has indexed the folder", async () => {
    expect(await afterRestart((file) => rmSync(file))).toEqual([]);
  }, 20_000);

  test("a file whose passage was edited out: the same", async () => {
    const edited = (file: string) =>
      writeFileSync(file, "# Okapis\n\nNothing to see here, and longer now.\n");
    expect(await afterRestart(edited)).toEqual([]);
  }, 20_000);

  test("a file unchanged: the saved state stays", async () => {
    expect((await afterRestart(() => {})).length).toBeGreaterThan(0);
  }, 20_000);
});

describe("a memory folder's file removed while the core runs", () => {
  const MARK = "NUMBAT-7730";
  const PASSAGE = "termite eater of the woodland";

  /** The folder's one file, and a core recalling from the folder. */
  function numbatCore(notes: string) {
    const file = join(notes, "numbat.md");
    writeFileSync(file, `# Numbats\n\nThe ${MARK} is a ${PASSAGE}.\n`);
    return {
      file,
      h: harness({ quietMs: QUIET_MS, config: { memory: { enabled: true, top_k: 5, folders: [notes] } } }),
    };
  }

  /** Session z recalls the file, and its state is saved quoting it. */
  async function recalledAndSaved(h: ChatHarness) {
    h.llama.script({ content: ["ok"] });
    await say(h, "z", `tell me about the ${MARK}`);
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).toContain(PASSAGE);
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    expect(filesHolding(join(h.dataDir, "kv"), PASSAGE).length).toBeGreaterThan(0);
  }

  test("the saved state quoting it is erased without a restart (the folder is watched)", async () => {
    using notes = tmpdir("local-ai-notes-");
    const core = numbatCore(notes.path);
    await using h = core.h;
    await recalledAndSaved(h);
    rmSync(core.file);
    expect(
      await waitFor(() => filesHolding(join(h.dataDir, "kv"), PASSAGE).length === 0, { timeoutMs: 8000 }),
    ).toBe(true);
  }, 20_000);

  test("a turn right after the removal does not quote it (the recall checks the file)", async () => {
    using notes = tmpdir("local-ai-notes-");
    const core = numbatCore(notes.path);
    await using h = core.h;
    await recalledAndSaved(h);
    rmSync(core.file);
    // Sooner than the watch's walk (a second after the change): only the recall's check stands.
    h.llama.script({ content: ["ok"] });
    await say(h, "y", `and the ${MARK} again?`);
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).not.toContain(PASSAGE);
  }, 20_000);
});

describe("a memory folder holding the app's own folder", () => {
  test("its saved KV files and its config are not memory: another user's chat recalls neither", async () => {
    const SECRET = "OCELOT-4417";
    const SAID = "the MARGAY-2290 is spotted";
    await using h = harness({
      quietMs: QUIET_MS,
      config: {
        agents: [{ name: "a", system_prompt: `Be brief. Never say ${SECRET}.` }],
        memory: { enabled: true, top_k: 5, folders: ["."] },
      },
    });
    writeFileSync(join(h.dir.path, "note.md"), "the serval note");
    h.llama.script({ content: ["ok"] });
    await say(h, "z", `remember that ${SAID}`);
    await h.quietSave();
    expect(pairInPlace(h)).toBe(true);
    expect(filesHolding(join(h.dataDir, "kv"), "MARGAY-2290").length).toBeGreaterThan(0);
    // A walk of the folder now, with the session's files in place.
    await h.services.store().folderIndex.refresh();
    const folderHits = (word: string) =>
      h.services
        .store()
        .memory.search("someone-else", word, 10)
        .filter((hit) => hit.cite.kind === "folder")
        .map((hit) => hit.doc.source);
    expect(folderHits("serval")).toEqual(["file:note.md"]);
    expect(folderHits("MARGAY")).toEqual([]);
    expect(folderHits("OCELOT")).toEqual([]);
  }, 20_000);
});

/** Memory on, and an agent with one tool: a turn of two steps, a delete placed between them. */
const withTool = () =>
  harness({
    config: {
      memory: { enabled: true, top_k: 5 },
      agents: [{ name: "a", system_prompt: "Be brief.", tools: ["t.echo"] }],
    },
  });

describe("a document erased while a turn's tool runs", () => {
  const PASSAGE = "striped grazer of the southern plains";

  test("the next step's prompt, which lacks it, does not hand the slot's copy to the RAM cache", async () => {
    await using h = withTool();
    // Long notes: the next step's prompt keeps less than half of what the slot holds.
    const paragraphs = Array.from({ length: 5 }, (_, i) =>
      `## Part ${i}\n\nThe QUAGGA-${i} was a ${PASSAGE}. `.repeat(6),
    );
    h.send("add", "documents.add", { text: `# Zebras\n\n${paragraphs.join("\n\n")}`, name: "z.md" });
    const doc = ((await h.terminal("add")).result as { document_id: string }).document_id;
    h.llama.script({ tool_calls: [{ name: "t__echo", arguments: { text: "ping" } }] }, { content: ["done"] });
    let asked = 0;
    h.llama.beforeChat = async () => {
      if (asked++ > 0) return;
      h.send("d", "documents.delete", { document_id: doc });
      await h.terminal("d");
    };
    const { terminal } = await h.chat(++id, { session_id: "z", input: "tell me about the QUAGGA" });
    expect(terminal.type).toBe("result");
    const sent = h.llama.requests.map((r) => JSON.stringify(r.body.messages));
    expect(sent[0]).toContain(PASSAGE);
    expect(sent[1]).not.toContain(PASSAGE);
    const kv = h.llama.model.kv;
    expect(await waitFor(() => !kv.slots[0]?.tokens.join(" ").includes("grazer"), { timeoutMs: 2000 })).toBe(
      true,
    );
    expect(kv.ram.flat().join(" ")).not.toContain("grazer");
  }, 20_000);
});

describe("a document an earlier turn's note quotes, erased while a tool runs", () => {
  const PASSAGE = "striped grazer of the southern plains";

  test("the next step does not send that note again", async () => {
    await using h = withTool();
    h.send("add", "documents.add", { text: `# Zebras\n\nThe QUAGGA was a ${PASSAGE}.`, name: "z.md" });
    const doc = ((await h.terminal("add")).result as { document_id: string }).document_id;
    h.llama.script({ content: ["ok"] });
    await say(h, "z", "tell me about the QUAGGA");
    // The second turn's first request carries the first turn's note (its prefix): then the delete.
    h.llama.script({ tool_calls: [{ name: "t__echo", arguments: { text: "ping" } }] }, { content: ["done"] });
    const asked = h.llama.requests.length;
    h.llama.beforeChat = async () => {
      if (h.llama.requests.length > asked) return;
      h.send("d", "documents.delete", { document_id: doc });
      await h.terminal("d");
    };
    const { terminal } = await h.chat(++id, { session_id: "z", input: "say more" });
    expect(terminal.type).toBe("result");
    const sent = h.llama.requests.slice(asked).map((r) => JSON.stringify(r.body.messages));
    expect(sent).toHaveLength(2);
    expect(sent[0]).toContain(PASSAGE);
    expect(sent[1]).toContain("ping");
    expect(sent[1]).not.toContain(PASSAGE);
  }, 20_000);
});
