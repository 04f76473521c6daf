import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { holdImportBefore } from "../fixtures/store-v01/hold-import.ts";
import { MemoryIndex } from "../fixtures/store-v01/memory-index.ts";
import { SessionStore } from "../fixtures/store-v01/session-store.ts";

const USER = "default_user";

/** A 0.1 folder in the harness's data folder: sessions `trip` and `other`, a memory entry each. */
function v01(h: ChatHarness): void {
  new SessionStore(h.dataDir, USER, "trip").saveHistory([
    { role: "user", content: "plan a trip" },
    { role: "assistant", content: "to Porto" },
  ]);
  new SessionStore(h.dataDir, USER, "other").saveHistory([{ role: "user", content: "herons" }]);
  const mem = MemoryIndex.forUser(h.dataDir, USER).load();
  mem.addTurn({ id: "1", session_id: "trip", text: "plan a trip\nto Porto", at: "2026-11-30T10:00:00.000Z" });
  mem.addTurn({ id: "2", session_id: "other", text: "herons by Porto", at: "2026-11-30T10:00:00.000Z" });
}

const answered = (h: ChatHarness, id: string): Msg | undefined =>
  h.out.find((m) => m.id === id && m.type !== "event");

/** A core over the 0.1 folder whose import the store's hook holds before `unit`, once it is there. */
function heldCore(unit: string, memory: boolean) {
  const held = holdImportBefore(unit);
  const core = new ChatHarness(
    { agents: [{ name: "plain" }], ...(memory ? {} : { memory: { enabled: false } }) },
    { store: { beforeImportUnit: held.hook } },
  );
  v01(core);
  return { core, held };
}

/** The store opened by a `sessions.list` ("l"), its import held where `held` holds it. */
async function heldImport(h: ChatHarness, held: ReturnType<typeof holdImportBefore>): Promise<void> {
  h.send("l", "sessions.list", {});
  await held.reached;
}

// The import of a 0.1 folder runs off the main loop, a unit at a time (store/import-v01-run.ts):
// held here before a unit by the store's test hook, so what answers meanwhile is placed exactly.
describe("the 0.1 import while the core answers", () => {
  test("ping and status answer during the import; sessions.list and a chat on an imported session wait for it", async () => {
    const { core, held } = heldCore(`${USER}/trip`, false);
    await using h = core;
    h.llama.script({ content: ["then Braga"] });
    // Released whatever happens: a store stops only once the unit under way is done.
    try {
      await heldImport(h, held);
      h.send("c", "chat", { input: "and after?", session_id: "trip" });
      h.send("p", "ping", {});
      expect((await h.terminal("p")).type).toBe("result");
      h.send("s", "status", {});
      expect((await h.terminal("s")).type).toBe("result");
      // Neither the list nor the chat has answered (an empty list, a history without the import).
      expect(answered(h, "l")).toBeUndefined();
      expect(answered(h, "c")).toBeUndefined();
      held.release();
      const list = (await h.terminal("l")) as Msg & { result: any };
      expect(list.result.sessions.map((s: { session_id: string }) => s.session_id).sort()).toEqual([
        "other",
        "trip",
      ]);
      expect((await h.terminal("c")).type).toBe("result");
      expect(
        h.llama.requests
          .at(-1)
          ?.body.messages.slice(1)
          .map((m) => m.content),
      ).toEqual(["plan a trip", "to Porto", "and after?"]);
      expect(h.history("trip").map((m) => m.content)).toEqual([
        "plan a trip",
        "to Porto",
        "and after?",
        "then Braga",
      ]);
    } finally {
      held.release();
    }
  });

  // documents.add and documents.list name a session: one whose unit is not imported yet was
  // answered session_not_found, though the host knew it and a moment later it was there.
  test("documents.add and documents.list naming an imported session wait for the import", async () => {
    const { core, held } = heldCore(`${USER}/trip`, false);
    await using h = core;
    try {
      await heldImport(h, held);
      h.send("a", "documents.add", { session_id: "trip", text: "# Porto\n\nThe bridge.", name: "p.md" });
      h.send("dl", "documents.list", { session_id: "trip" });
      // Sent after them on the same path, answered at once: it names no session.
      h.send("all", "documents.list", {});
      await h.terminal("all");
      expect(answered(h, "a")).toBeUndefined();
      expect(answered(h, "dl")).toBeUndefined();
      held.release();
      expect((await h.terminal("a")).type).toBe("result");
      expect((await h.terminal("dl")).type).toBe("result");
      h.send("dl2", "documents.list", { session_id: "trip" });
      const docs = (await h.terminal("dl2")) as Msg & { result: any };
      expect(docs.result.documents.map((d: { name: string }) => d.name)).toEqual(["p.md"]);
    } finally {
      held.release();
    }
  });

  // The wait for the import (minutes for years of chats) was not cancellable: a cancel was
  // answered cancelled: true, but the add itself only once the import had ended.
  test("a cancel answers a documents.add still waiting for the import at once, and it adds nothing", async () => {
    const { core, held } = heldCore(`${USER}/trip`, false);
    await using h = core;
    try {
      await heldImport(h, held);
      // The method's module loaded first (a list naming no session answers at once): the add
      // below is waiting for the import when the cancel comes, not for its module.
      h.send("w", "documents.list", {});
      await h.terminal("w");
      h.send("a", "documents.add", { session_id: "trip", text: "The HELDBRIDGE.", name: "p.md" });
      h.send("c", "cancel", { request_id: "a" });
      expect(await h.terminal("c")).toMatchObject({ result: { cancelled: true } });
      // Answered while the import is still held.
      expect(await h.terminal("a")).toMatchObject({ code: "cancelled", message: "cancelled by the host" });
      expect(answered(h, "l")).toBeUndefined();
      held.release();
      await h.terminal("l");
      h.send("dl", "documents.list", { session_id: "trip" });
      expect(((await h.terminal("dl")) as Msg & { result: any }).result.documents).toEqual([]);
    } finally {
      held.release();
    }
  });

  // Held before the session's own unit (its rows not yet written) and before the memory file's
  // (its rows written, its memory entry not): the import must not bring back what the delete erased.
  for (const unit of [`${USER}/trip`, USER]) {
    test(`a sessions.delete sent while the import is held before ${unit} leaves the session erased`, async () => {
      const { core, held } = heldCore(unit, true);
      await using h = core;
      try {
        await heldImport(h, held);
        h.send("d", "sessions.delete", { session_id: "trip" });
        h.send("p", "ping", {});
        await h.terminal("p");
        expect(answered(h, "d")).toBeUndefined();
        held.release();
        expect(((await h.terminal("d")) as Msg & { result: any }).result).toEqual({
          deleted: true,
          set_aside_copies: [],
        });
        const store = h.services.store();
        expect(store.list(USER, 10).sessions.map((s) => s.session_id)).toEqual(["other"]);
        expect(store.memory.search(USER, "Porto", 5).map((hit) => hit.doc.source)).toEqual(["session:other"]);
        const aside = join(h.dataDir, "imported-0.1", "users", USER);
        expect(existsSync(join(aside, "sessions", "trip"))).toBe(false);
        expect(existsSync(join(aside, "sessions", "other", "history.json"))).toBe(true);
        expect(readFileSync(join(aside, "memory", "turns.json"), "utf8")).not.toContain("to Porto");
      } finally {
        held.release();
      }
    });
  }
});
