import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { commitNotedTurn as chat } from "../../fixtures/noted-turn.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// An erase the core dies in (SIGKILL, power loss) before its answer: the host, answered
// nothing, sends it again after the restart (docs/agent.md, "An erase the core dies in"). Seen
// through the compiled core killed at random moments: a sessions.delete killed after the live
// rows' commit, while it scrubbed the databases set aside, answered session_not_found when sent
// again and left the session's text in the copies for good.

/** A data folder whose database, with alice's session `s` holding ZEBRAFISH, was also set aside. */
function withCopy(dir: string): void {
  const store = Store.open(dir);
  for (let i = 0; i < 20; i++) chat(store, "alice", "s", `ZEBRAFISH ${i}`);
  chat(store, "alice", "other", "alice keeps PELICAN");
  store.close();
  Bun.spawnSync(["cp", join(dir, "local-ai.db"), join(dir, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z")]);
  // Its 0.1 files, kept aside after the import (docs/agent.md): erased with it.
  const sdir = join(dir, "imported-0.1", "users", "alice", "sessions", "s");
  mkdirSync(sdir, { recursive: true });
  writeFileSync(join(sdir, "history.json"), JSON.stringify({ version: 1, messages: ["ZEBRAFISH old"] }));
}

/** The store's erase of the copies dies the first time (the core killed there). */
function dyingInCopies(store: Store): void {
  const s = store as unknown as { eraseCopies: (...a: unknown[]) => Promise<unknown> };
  s.eraseCopies = () => Promise.reject(new Error("killed"));
}

/** What a host sees on sending the delete again: the session there (then deleted) or not. */
async function deleteAgain(dir: string, erase: (store: Store) => Promise<unknown>): Promise<void> {
  const store = Store.open(dir);
  try {
    await erase(store);
  } finally {
    store.close();
  }
}

describe("an erase cut short, sent again after the restart", () => {
  test("sessions.delete: nothing of the session left in a database set aside", async () => {
    using dir = tmpdir();
    withCopy(dir.path);
    const store = Store.open(dir.path);
    dyingInCopies(store);
    const first = await store.deleteSession("alice", "s").then(
      () => "ok",
      (err: Error) => err.message,
    );
    expect(first).toBe("killed");
    store.close();
    await deleteAgain(dir.path, async (again) => {
      // As sessions.delete does: a session not there is session_not_found, and nothing more.
      if (again.conversations.session("alice", "s")) await again.deleteSession("alice", "s");
    });
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
    expect(filesHolding(dir.path, "PELICAN").length).toBeGreaterThan(0);
  });

  test("documents.delete: nothing of the document left in a database set aside", async () => {
    using dir = tmpdir();
    const setup = Store.open(dir.path);
    chat(setup, "alice", "s", "hello");
    const pending = {
      documentId: "doc1",
      userId: "alice",
      sessionId: "s",
      since: setup.conversations.erasureMark(),
      at: Date.now(),
    };
    setup.documents.addChunks(pending, [{ index: 0, text: "OSPREY ".repeat(200) }]);
    setup.documents.commit(pending, { name: "d.md", format: "markdown", chunks: 1, bytes: 10 });
    const doc = pending.documentId;
    setup.close();
    Bun.spawnSync([
      "cp",
      join(dir.path, "local-ai.db"),
      join(dir.path, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z"),
    ]);
    const store = Store.open(dir.path);
    dyingInCopies(store);
    const first = await store.deleteDocument("alice", doc).then(
      () => "ok",
      (err: Error) => err.message,
    );
    expect(first).toBe("killed");
    store.close();
    await deleteAgain(dir.path, (again) => again.deleteDocument("alice", doc));
    expect(filesHolding(dir.path, "OSPREY")).toEqual([]);
  });
});
