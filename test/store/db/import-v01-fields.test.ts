import { expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { png } from "../../fixtures/images.ts";
import { holdImportBefore } from "../../fixtures/store-v01/hold-import.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/**
 * Fields of 1.0's messages that 0.1 never wrote (docs/agent.md, "Import of the 0.1 layout"): a
 * 0.1 file that has them was made up, and the import takes none of them from it.
 */

/** ann's 0.1 session `id` whose history.json holds `messages` as written (no 0.1 writer to tidy them). */
function v01Session(dataDir: string, id: string, messages: unknown[]): void {
  const dir = join(dataDir, "users", "ann", "sessions", id);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "history.json"), JSON.stringify({ version: 1, messages }));
}

test("a 0.1 message flagged by_core in the file is imported as the user's: no session hidden", async () => {
  using dir = tmpdir();
  v01Session(dir.path, "plain", [{ role: "user", content: "a plain question" }]);
  // by_core on the only message: counted as none, the session was left out of sessions.list.
  v01Session(dir.path, "flagged", [{ role: "user", content: "the user's own words", by_core: true }]);
  const store = Store.open(dir.path);
  try {
    await store.whenImported();
    expect(
      store
        .list("ann", 10)
        .sessions.map((s) => s.session_id)
        .sort(),
    ).toEqual(["flagged", "plain"]);
    const page = store.get("ann", "flagged", 10);
    expect(page.session.message_count).toBe(1);
    expect(page.messages.map((m) => m.content)).toEqual(["the user's own words"]);
  } finally {
    store.close();
  }
});

/** ann's 0.1 session `id` with only a checkpoint.json whose turn is `turn`. */
function v01Checkpoint(dataDir: string, id: string, turn: unknown[]): void {
  const dir = join(dataDir, "users", "ann", "sessions", id);
  mkdirSync(dir, { recursive: true });
  const cp = {
    version: 1,
    trace_id: "t",
    user_input: "the user's own words",
    agent: "a",
    step: 1,
    parse_errors: 0,
    best_text: "",
    turn,
    updated_at: "2026-11-30T10:00:00.000Z",
  };
  writeFileSync(join(dir, "checkpoint.json"), JSON.stringify(cp));
}

test("a 0.1 checkpoint's message flagged by_core, or naming images, is resumed as the user's with none", async () => {
  using dir = tmpdir();
  // Kept as it was, its resume's commit wrote the user's input as the core's: hidden again.
  // An image's id (0.1 had none): its resume sent the user's image of another session, whose id it was.
  const ref = { id: 1, mime: "image/png", bytes: 71 };
  v01Checkpoint(dir.path, "cp", [
    { role: "user", content: "the user's own words", by_core: true, attachments: [ref] },
  ]);
  const store = Store.open(dir.path);
  try {
    await store.whenImported();
    const body = JSON.parse(store.conversations.checkpoint("ann", "cp") ?? "{}");
    expect(body.turn).toEqual([{ role: "user", content: "the user's own words" }]);
  } finally {
    store.close();
  }
});

// 0.1 had no images (they came with 1.0's attachments table): a 0.1 message naming one named
// an image of 1.0's. Every attachments query is keyed by the user, so none of another user's
// was ever reached; but the import's commit tied the named image of the same session to the
// imported message, taking it from the 1.0 message it was attached to, and an edit of the
// imported turns then erased it.
test("a 0.1 message's attachments in the file are ignored: a 1.0 image of the session stays with its message", async () => {
  using dir = tmpdir();
  v01Session(dir.path, "s", [{ role: "user", content: "placeholder" }]);
  // A chat in the session before the import reached it (an import that gave up, say).
  const held = holdImportBefore("ann/s");
  const store = Store.open(dir.path, { beforeImportUnit: held.hook });
  try {
    await held.reached;
    store.conversations.ensureSession("ann", "s", "a", "look", new Date());
    const refs = await store.conversations.attachments.stage(
      "ann",
      "s",
      [{ mime: "image/png", data: png(2, 2) }],
      new Date(),
    );
    store.conversations.commitTurn({
      userId: "ann",
      sessionId: "s",
      agent: "a",
      messages: [
        { role: "user", content: "look", attachments: refs },
        { role: "assistant", content: "a picture" },
      ],
      at: new Date(),
    });
    v01Session(dir.path, "s", [{ role: "user", content: "made up", attachments: refs }]);
    held.release();
    await store.whenImported();
    const page = store.get("ann", "s", 10);
    expect(page.messages.map((m) => [m.content, m.attachments])).toEqual([
      ["look", refs],
      ["a picture", undefined],
      ["made up", undefined],
    ]);
  } finally {
    store.close();
  }
});
