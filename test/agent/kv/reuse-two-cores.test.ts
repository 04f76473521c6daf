import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import type { SupervisorSnapshot } from "../../../src/runtime/snapshot.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { holdCommit } from "../../fixtures/hold-commit.ts";
import { writeFakeModel } from "../../fixtures/llama-stand-in/binary.ts";
import { waitFor } from "../../fixtures/wait.ts";
import { ChatHarness } from "../harness.ts";

// Two cores on one data folder (docs/agent.md#prompt-reuse): what one erases (documents.delete,
// sessions.delete) reaches only its own prompt records and the files on disk at that moment. The
// other core's records, and a sidecar a core reads later, are checked against the database when
// used and when saved: a note quoting a source that is gone is never sent or kept again.

const MARK = "QUAGGA-7731";
/** The source's own words: in a prompt only as the memory note quoting it. */
const PASSAGE = "subspecies of zebra";
const USER = "default_user";

/**
 * The quiet save's idle wait for the cores whose tests need that save: one no test reaches, the
 * test fires the save itself once it arranged what the save must meet, and awaits it
 * (`h.quietSave()`). Waiting out a short wait instead, under load the save may not have run yet.
 */
const FIRED_BY_TEST = 600_000;

/**
 * A core whose stand-in saves into `dataDir`/kv; `dataDir` given: another core's folder and model;
 * `quietMs`: its quiet save's wait (default 2 s).
 */
function core(shared?: { dataDir: string; modelPath: string }, eraseDelayMs = 0, quietMs?: number) {
  return new ChatHarness(
    {
      agents: [{ name: "a", system_prompt: "Be brief." }],
      memory: { enabled: true, top_k: 5 },
      ...(shared ? { app: { data_dir: shared.dataDir, max_parse_errors: 2, max_steps: 8 } } : {}),
    },
    {
      slots: 1,
      standIn: (dir) => {
        const kv = join(shared?.dataDir ?? join(dir, "data"), "kv");
        mkdirSync(kv, { recursive: true });
        return {
          modelPath: shared?.modelPath ?? writeFakeModel(dir),
          slotSavePath: `${kv}/`,
          slots: 1,
          unscripted: "echo",
          ...(eraseDelayMs ? { slotFiles: { eraseDelayMs } } : {}),
        };
      },
      reuseQuietMs: quietMs,
    },
  );
}

let id = 0;
async function say(h: ChatHarness, session: string, input: string): Promise<void> {
  const { terminal } = await h.chat(++id, { session_id: session, input });
  expect(terminal.type).toBe("result");
}

const kvDir = (h: ChatHarness) => join(h.dataDir, "kv");
const lastPrompt = (h: ChatHarness) => JSON.stringify(h.llama.requests.at(-1)?.body.messages);
const restores = (h: ChatHarness) => h.llama.log.filter((l) => l.includes("action = restore")).length;
const nameOf = (session: string) => new KvDisk("", 0).nameOf(USER, session);
/**
 * The files under data_dir/kv holding the passage, but s0's own: a session erased by a bare
 * store handle keeps its own files (a core's sessions.delete takes them); those quoting it are tested.
 */
const quoting = (h: ChatHarness) =>
  filesHolding(kvDir(h), PASSAGE).filter((f) => !f.startsWith(nameOf("s0")));
/** z's state and sidecar in place (quoting the passage), nothing under a temporary name. */
const zSaved = (h: ChatHarness) =>
  quoting(h).some((f) => f.startsWith(nameOf("z"))) && !readdirSync(kvDir(h)).some((f) => f.endsWith(".tmp"));

/** The passage (a library document, or a turn of session `s0`) recalled into z's prompt, z's state saved quietly. */
async function recalled(h: ChatHarness, kind: "document" | "session"): Promise<string> {
  // Scripted replies: the echo would put the note into the history, which is not what is tested.
  h.llama.script({ content: ["ok"] });
  let source = "s0";
  if (kind === "document") {
    h.send("add", "documents.add", { text: `# Zebras\n\nThe ${MARK} was a ${PASSAGE}.`, name: "z.md" });
    source = ((await h.terminal("add")).result as { document_id: string }).document_id;
  } else {
    await say(h, "s0", `the ${MARK} was a ${PASSAGE}`);
    h.llama.script({ content: ["ok"] });
  }
  await say(h, "z", `tell me about the ${MARK}`);
  expect(lastPrompt(h)).toContain(PASSAGE);
  await h.quietSave();
  expect(zSaved(h)).toBe(true);
  return source;
}

/** The store failing the notes' check (a lock held too long) until the scope ends. */
function sourcesUnanswered(h: ChatHarness): Disposable {
  const store = h.services.store();
  const check = store.sourcesGone.bind(store);
  store.sourcesGone = () => {
    throw new Error("database is locked");
  };
  return {
    [Symbol.dispose]: () => {
      store.sourcesGone = check;
    },
  };
}

/** The erase as a second core does it: the same folder's database, none of this core's prompt reuse. */
async function eraseElsewhere(h: ChatHarness, kind: "document" | "session", source: string) {
  const other = Store.open(h.dataDir);
  try {
    if (kind === "document") expect(await other.deleteDocument(USER, source)).toBe(true);
    else expect((await other.deleteSession(USER, source)).deleted).toBe(true);
  } finally {
    other.close();
  }
}

describe("a source erased by another core, in this core's prompt records", () => {
  test("a document deleted through a second store: the next turn sends no note of it, and no file keeps it", async () => {
    await using h = core(undefined, 0, FIRED_BY_TEST);
    const doc = await recalled(h, "document");
    await eraseElsewhere(h, "document", doc);
    await say(h, "z", "and what else?");
    expect(lastPrompt(h)).not.toContain(PASSAGE);
    const { kv } = h.llama.model;
    expect(kv.slots[0]?.tokens.join("")).not.toContain(PASSAGE);
    expect(kv.ram.flat().join("")).not.toContain(PASSAGE);
    expect(quoting(h)).toEqual([]);
    // z's state is saved again, without the note.
    await h.quietSave();
    expect(readdirSync(kvDir(h)).filter((f) => f.startsWith(nameOf("z")))).toHaveLength(2);
    expect(quoting(h)).toEqual([]);
  }, 20_000);

  test("the slot's erase answering late: the next turn waits for it, so no cache keeps the note", async () => {
    // A slot is emptied only once its task ends; a turn sent before the erase lands would hand the
    // slot's prompt, note and all, to llama-server's RAM cache (transcripts/94).
    await using h = core(undefined, 300, FIRED_BY_TEST);
    const doc = await recalled(h, "document");
    await eraseElsewhere(h, "document", doc);
    await say(h, "z", "and what else?");
    expect(lastPrompt(h)).not.toContain(PASSAGE);
    expect(h.llama.model.kv.ram.flat().join("")).not.toContain(PASSAGE);
  }, 20_000);

  for (const [kind, erased] of [
    ["document", "deleted"],
    ["session", "deleted"],
    // Its row stays, the turn quoted goes (replace_from 0).
    ["session", "edited"],
  ] as const) {
    test(`a saved state quoting a ${kind} ${erased} since: a fresh core neither restores it nor sends the note`, async () => {
      await using a = core(undefined, 0, FIRED_BY_TEST);
      const source = await recalled(a, kind);
      if (erased === "edited") editElsewhere(a);
      else await eraseElsewhere(a, kind, source);
      // Core a never learns of the erase; b, a fresh core on the same folder and model, finds a's sidecar.
      await using b = core({ dataDir: a.dataDir, modelPath: join(a.dir.path, "model.gguf") });
      b.llama.script({ content: ["ok"] });
      await say(b, "z", "and what else?");
      expect(restores(b)).toBe(0);
      expect(lastPrompt(b)).not.toContain(PASSAGE);
      expect(quoting(a)).toEqual([]);
    }, 20_000);
  }

  test("a store that cannot answer the check: the record is neither used nor saved, and nothing is erased", async () => {
    await using h = core(undefined, 0, FIRED_BY_TEST);
    await recalled(h, "document");
    using _ = sourcesUnanswered(h);
    await say(h, "z", "and what else?");
    // Not used: the earlier turn is sent without the note its record laid out there.
    const earlier = h.llama.requests.at(-1)?.body.messages.find((m) => m.role === "user");
    expect(JSON.stringify(earlier)).not.toContain(PASSAGE);
    // The saved state and the records of the user's sessions are kept for when the store answers.
    expect(quoting(h).some((f) => f.startsWith(nameOf("z")))).toBe(true);
  }, 20_000);
});

describe("a session edited or deleted by another core, in the slot it holds here", () => {
  /** The plan's --cache-ram, as the supervisor's snapshot says it: a slot's holder is left to it. */
  const withRamCache = (h: ChatHarness) =>
    Object.assign(h.provider, {
      snapshot: () => ({ state: "ready", sleep: "awake", cacheRamBytes: 2 ** 20 }) as SupervisorSnapshot,
    });

  test("a document its notes quote deleted there: another session taking its slot here hands none to the RAM cache", async () => {
    await using h = core(undefined, 0, FIRED_BY_TEST);
    withRamCache(h);
    const doc = await recalled(h, "document");
    const { kv } = h.llama.model;
    expect(kv.ram.flat().join("")).not.toContain(PASSAGE);
    await eraseElsewhere(h, "document", doc);
    h.llama.script({ content: ["ok"] });
    await say(h, "t", "something else entirely");
    expect(kv.ram.flat().join("")).not.toContain(PASSAGE);
    expect(kv.slots[0]?.tokens.join("")).not.toContain(PASSAGE);
  }, 20_000);

  test("a store that cannot answer whether its notes' document stands: another session taking its slot hands none to the RAM cache", async () => {
    // A store that fails to answer vouches for no note's source (server/reuse-store.ts): the
    // document may be gone, so the slot is emptied rather than left to llama-server's cache.
    await using h = core(undefined, 0, FIRED_BY_TEST);
    withRamCache(h);
    await recalled(h, "document");
    using _ = sourcesUnanswered(h);
    h.llama.script({ content: ["ok"] });
    await say(h, "t", "something else entirely");
    const { kv } = h.llama.model;
    expect(kv.ram.flat().join("")).not.toContain(PASSAGE);
    expect(kv.slots[0]?.tokens.join("")).not.toContain(PASSAGE);
  }, 20_000);

  test("deleted there while another session's unread turn holds its slot: the next taker hands none of it on", async () => {
    await using h = core();
    withRamCache(h);
    await say(h, "s0", "my code word is ORYX-5521");
    // t takes the slot; its request fails before llama-server took it up: s0's tokens stay there.
    h.llama.script({ error: { status: 500, message: "boom" } });
    expect((await h.chat(++id, { session_id: "t", input: "hello there" })).terminal.type).toBe("error");
    const { kv } = h.llama.model;
    expect(kv.slots[0]?.tokens.join("")).toContain("ORYX-5521");
    await eraseElsewhere(h, "session", "s0");
    await say(h, "u", "something else entirely");
    expect(kv.ram.flat().join("")).not.toContain("ORYX-5521");
    expect(kv.slots[0]?.tokens.join("")).not.toContain("ORYX-5521");
  }, 20_000);

  test("deleted there while it is saved out of the slot here: the taking turn hands none of it to the RAM cache", async () => {
    // No --cache-ram in the snapshot (a server not planned here): the session giving way is saved
    // on the taking turn's path, while llama-server's RAM cache is on (the stand-in's default).
    await using h = core(undefined, 0, FIRED_BY_TEST);
    await say(h, "s0", "my code word is ORYX-8813");
    {
      using save = holdCommit();
      const t = say(h, "t", "something else entirely");
      expect(await waitFor(save.held, { timeoutMs: 5000 })).toBe(true);
      await eraseElsewhere(h, "session", "s0");
      save.open();
      await t;
    }
    const { kv } = h.llama.model;
    expect(kv.ram.flat().join("")).not.toContain("ORYX-8813");
    expect(kv.slots[0]?.tokens.join("")).not.toContain("ORYX-8813");
  }, 20_000);

  for (const how of ["edited", "deleted"] as const)
    test(`${how} there: another session taking its slot here hands none of it to the RAM cache`, async () => {
      await using h = core();
      withRamCache(h);
      await say(h, "s0", "my code word is ORYX-5521");
      if (how === "edited") editElsewhere(h);
      else await eraseElsewhere(h, "session", "s0");
      await say(h, "t", "something else entirely");
      const { kv } = h.llama.model;
      expect(kv.ram.flat().join("")).not.toContain("ORYX-5521");
      expect(kv.slots[0]?.tokens.join("")).not.toContain("ORYX-5521");
    }, 20_000);
});

/** s0's first turn replaced (`replace_from: 0`) as a second core does it: the session's row stays, its memory row goes. */
function editElsewhere(h: ChatHarness): void {
  const other = Store.open(h.dataDir);
  try {
    const messages = [
      { role: "user" as const, content: "something else" },
      { role: "assistant" as const, content: "ok" },
    ];
    other.conversations.commitTurn({
      ...{ userId: USER, sessionId: "s0", agent: "a", messages, replaceFromSeq: 0 },
      ...{ memoryText: "something else", at: new Date() },
    });
  } finally {
    other.close();
  }
}

describe("a session edited, in the records of the sessions whose notes quote its erased turns", () => {
  test("edited in this core: the next turn sends no note of it, and no file keeps it", async () => {
    await using h = core(undefined, 0, FIRED_BY_TEST);
    await recalled(h, "session");
    h.llama.script({ content: ["ok"] });
    const { terminal } = await h.chat(++id, { session_id: "s0", replace_from: 0, input: "something else" });
    expect(terminal.type).toBe("result");
    expect(quoting(h)).toEqual([]);
    h.llama.script({ content: ["ok"] });
    await say(h, "z", "and what else?");
    expect(lastPrompt(h)).not.toContain(PASSAGE);
    expect(h.llama.model.kv.slots[0]?.tokens.join("")).not.toContain(PASSAGE);
    await h.quietSave();
    expect(quoting(h)).toEqual([]);
  }, 20_000);

  test("edited through a second store: the next turn sends no note of it, and no file keeps it", async () => {
    await using h = core(undefined, 0, FIRED_BY_TEST);
    await recalled(h, "session");
    editElsewhere(h);
    h.llama.script({ content: ["ok"] });
    await say(h, "z", "and what else?");
    expect(lastPrompt(h)).not.toContain(PASSAGE);
    const { kv } = h.llama.model;
    expect(kv.slots[0]?.tokens.join("")).not.toContain(PASSAGE);
    // z's prompt with the note in no RAM cache entry (s0's own prompt is the editing core's to reach).
    const zNoted = (e: string[]) => e.join("").includes("tell me about") && e.join("").includes(PASSAGE);
    expect(kv.ram.filter(zNoted)).toEqual([]);
    await h.quietSave();
    expect(quoting(h)).toEqual([]);
  }, 20_000);
});
