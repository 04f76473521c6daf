import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { refsOf, TurnImages } from "../../../src/agent/turn/images.ts";
import type { DataUrl } from "../../../src/llama/data-url.ts";
import type { AttachmentRef } from "../../../src/protocol/chat-message.ts";
import { attachmentOf, readAttachment } from "../../../src/store/attachment-of.ts";
import { DB_FILE, damagedMarker } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { png } from "../../fixtures/images.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A user message's images in the database (docs/protocol.md#images): staged with the turn,
// tied to the message at its commit, shown by sessions.get, given by sessions.attachment to their
// user only, replaced with an edit, and erased for good with their session or user.

/** A PNG whose pixels spell `marker` over and over (stored uncompressed enough to find: the IDAT is raw bytes here). */
function imageHolding(marker: string): Uint8Array {
  const head = png(2, 2);
  return Buffer.concat([head, Buffer.from(marker.repeat(64))]);
}

async function turnWithImages(
  store: Store,
  u: string,
  s: string,
  text: string,
  images: Uint8Array[],
  replaceFromSeq?: number,
  carried: AttachmentRef[] = [],
) {
  store.conversations.ensureSession(u, s, "a", text, new Date());
  const staged = await store.conversations.attachments.stage(
    u,
    s,
    images.map((data) => ({ mime: "image/png", data })),
    new Date(),
  );
  const attachments = [...carried, ...staged];
  store.conversations.commitTurn({
    userId: u,
    sessionId: s,
    agent: "a",
    messages: [
      { role: "user", content: text, ...(attachments.length ? { attachments } : {}) },
      { role: "assistant", content: `seen ${text}` },
    ],
    ...(replaceFromSeq !== undefined ? { replaceFromSeq } : {}),
    at: new Date(),
    imageTokens: new Map(staged.map((r) => [r.id, 64])),
  });
  return attachments;
}

/** What `work` returns, and the turns of the event loop it gave back while it ran (none: it held the loop). */
async function turnsDuring<T>(work: () => Promise<T> | T): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let running = true;
  const spin = () => {
    if (!running) return;
    turns++;
    setImmediate(spin);
  };
  setImmediate(spin);
  const value = await work();
  running = false;
  return { value, turns };
}

describe("attachments", () => {
  test("sessions.get shows a message's images, sessions.attachment gives their bytes to their user only", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const image = imageHolding("HEDGEHOG");
    const [ref] = await turnWithImages(store, "alice", "s", "look", [image]);
    const page = store.get("alice", "s", 10);
    expect(page.messages[0]?.attachments).toEqual([
      { id: ref!.id, mime: "image/png", bytes: image.byteLength },
    ]);
    expect(page.messages[1]?.attachments).toBeUndefined();
    const got = await attachmentOf(store, "alice", ref!.id);
    // Written as the one base64 string it is (util/long-text.ts).
    expect(Buffer.from(JSON.parse(JSON.stringify(got.data)), "base64").equals(Buffer.from(image))).toBe(true);
    await expect(attachmentOf(store, "bob", ref!.id)).rejects.toThrow(/no attachment/);
    // The history the model sees carries the refs, and the tokens it was counted at are kept.
    const history = store.conversations.history("alice", "s");
    expect(history[0]).toEqual({ role: "user", content: "look", attachments: [ref!] });
    expect(store.conversations.attachments.tokens("alice", [ref!.id]).get(ref!.id)).toBe(64);
    store.close();
  });

  test("an edit drops the replaced messages' images; a regenerate keeps the ones it carries", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const [first] = await turnWithImages(store, "alice", "s", "one", [png(1, 1)]);
    const [second] = await turnWithImages(store, "alice", "s", "two", [png(2, 2)]);
    // Regenerate of seq 2: the same image carried, same id.
    await turnWithImages(store, "alice", "s", "two", [], 2, [second!]);
    expect(store.get("alice", "s", 10).messages[2]?.attachments?.map((a) => a.id)).toEqual([second!.id]);
    // An edit of seq 0 with a new image: both older images go.
    const [edited] = await turnWithImages(store, "alice", "s", "one again", [png(3, 3)], 0);
    const page = store.get("alice", "s", 10);
    expect(page.messages).toHaveLength(2);
    expect(page.messages[0]?.attachments?.map((a) => a.id)).toEqual([edited!.id]);
    await expect(attachmentOf(store, "alice", first!.id)).rejects.toThrow();
    await expect(attachmentOf(store, "alice", second!.id)).rejects.toThrow();
    store.close();
  });

  test("images staged by a turn that never commits are not shown, and go when the checkpoint goes", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.ensureSession("alice", "s", "a", "x", new Date());
    const [staged] = await store.conversations.attachments.stage(
      "alice",
      "s",
      [{ mime: "image/png", data: png(1, 1) }],
      new Date(),
    );
    store.conversations.saveCheckpoint("alice", "s", "{}", new Date());
    expect(store.conversations.history("alice", "s")).toEqual([]);
    expect((await attachmentOf(store, "alice", staged!.id)).bytes).toBeGreaterThan(0);
    store.conversations.clearCheckpoint("alice", "s");
    await expect(attachmentOf(store, "alice", staged!.id)).rejects.toThrow();
    store.close();
  });

  test("users.delete and sessions.delete leave no byte of an image in any file under data_dir", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (let i = 0; i < 5; i++)
      await turnWithImages(store, "alice", `s${i % 2}`, `turn ${i}`, [imageHolding("ZEBRAFISHPIXELS")]);
    await turnWithImages(store, "alice", "gone", "x", [imageHolding("QUOKKAPIXELS")]);
    await turnWithImages(store, "bob", "b", "bob's", [imageHolding("PELICANPIXELS")]);
    expect(filesHolding(dir.path, "ZEBRAFISHPIXELS").length).toBeGreaterThan(0);
    await store.deleteSession("alice", "gone");
    expect(filesHolding(dir.path, "QUOKKAPIXELS")).toEqual([]);
    await store.deleteUser("alice");
    expect(filesHolding(dir.path, "ZEBRAFISHPIXELS")).toEqual([]);
    expect(filesHolding(dir.path, "PELICANPIXELS").length).toBeGreaterThan(0);
    store.close();
    expect(filesHolding(dir.path, "ZEBRAFISHPIXELS")).toEqual([]);
  });

  test("a turn's images are staged a part a transaction, the event loop turning between", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.ensureSession("alice", "s", "a", "x", new Date());
    // Three images of three parts: in one transaction, 8 of 20 MB held the loop 1.8 s.
    const images = ["A", "B", "C"].map((c) => ({ mime: "image/png", data: Buffer.alloc(2_500_000, c) }));
    const staged = await turnsDuring(() =>
      store.conversations.attachments.stage("alice", "s", images, new Date()),
    );
    const refs = staged.value;
    expect(staged.turns).toBeGreaterThanOrEqual(8);
    expect(
      await Promise.all(refs.map(async (r) => (await attachmentOf(store, "alice", r.id)).bytes)),
    ).toEqual([2_500_000, 2_500_000, 2_500_000]);
    const back = (await readAttachment(store, "alice", refs[1]!.id))!.data;
    expect(Buffer.from(back).equals(images[1]!.data)).toBe(true);
    store.close();
  });

  test("an image is read back a part at a time, the loop turning between: sessions.attachment, a turn's history", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    // Three parts: read in one go, a 20 MB image held the loop ~40 ms, three a turn resends over 100 ms.
    const image = Buffer.alloc(2_500_000, "K");
    const [ref] = await turnWithImages(store, "alice", "s", "look", [image]);
    const given = await turnsDuring(() => attachmentOf(store, "alice", ref!.id));
    expect(Buffer.from(given.value.data.pieces.join(""), "base64").equals(image)).toBe(true);
    expect(given.turns).toBeGreaterThanOrEqual(2);
    // A later turn's request carries the history's image: read before it is built, in parts too.
    const images = new TurnImages(store, "alice");
    const messages = store.conversations.history("alice", "s");
    const sent = await turnsDuring(async () => {
      await images.load(refsOf(messages));
      return images.wire(messages);
    });
    expect(sent.turns).toBeGreaterThanOrEqual(2);
    const url = (sent.value[0] as { content: { image_url?: { url: DataUrl } }[] }).content[1]?.image_url?.url;
    expect(Buffer.from(url!.bytes).equals(image)).toBe(true);
    store.close();
  });

  test("a history image another core's delete erased mid-turn ends the turn as the delete's, not internal_error", async () => {
    using dir = tmpdir();
    const here = Store.open(dir.path);
    const [ref] = await turnWithImages(here, "alice", "s", "look", [png(4, 4)]);
    // This core's turn began (its erase mark noted); another core on the same folder then
    // deletes the session, which no watcher of this core hears of.
    const mark = { since: here.conversations.erasureMark(), owner: here.leases.owner };
    const images = new TurnImages(here, "alice", { sessionId: "s", mark });
    const other = Store.open(dir.path);
    await other.deleteSession("alice", "s");
    const err = await images.load([ref!]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: "cancelled", data: { reason: "session_deleted", session_id: "s" } });
    other.close();
    here.close();
  });

  test("an image not whole in the store (staged a part at a time, erased in steps) is not given as zeros", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.ensureSession("alice", "s", "a", "x", new Date());
    const image = { mime: "image/png", data: Buffer.alloc(2_500_000, "A") };
    // A second connection, as another thread's erase or a peek at the rows.
    using raw = new Database(join(dir.path, DB_FILE));
    const seen: (number | string)[] = [];
    let id = 0;
    const peeking = async <T>(work: () => T): Promise<T> => {
      const done = work();
      // Between its parts' transactions: the row and its first part are in, the rest not yet.
      id ||= (raw.query("SELECT max(id) AS id FROM attachments").get() as { id: number }).id;
      try {
        seen.push((await attachmentOf(store, "alice", id)).bytes);
      } catch (err) {
        seen.push((err as { data?: { reason?: string } }).data?.reason ?? String(err));
      }
      return done;
    };
    const [ref] = await store.conversations.attachments.stage(
      "alice",
      "s",
      [image],
      new Date(),
      undefined,
      peeking,
    );
    expect(seen).toEqual(["attachment_not_found", "attachment_not_found", 2_500_000]);
    // An erase in steps (a full disk) takes the parts before the row: none given half gone.
    raw.query("DELETE FROM attachment_data WHERE id = ? AND part = 1").run(ref!.id);
    await expect(attachmentOf(store, "alice", ref!.id)).rejects.toThrow(/no attachment/);
    store.close();
  });

  test("a size column no image has (a damaged file) is that attachment's damage: nothing allocated, the database not marked", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const [ref, other] = await turnWithImages(store, "alice", "s", "look", [png(2, 2), png(3, 3)]);
    using raw = new Database(join(dir.path, DB_FILE));
    // Each past what an image may be (20 MiB): 1 TiB was a failed allocation, -1 a RangeError,
    // both internal_error with a trace; 21 MiB allocated 21 MB, then was "no attachment".
    for (const bytes of [2 ** 40, -1, 21 * 2 ** 20]) {
      raw.query("UPDATE attachments SET bytes = ? WHERE id = ?").run(bytes, ref!.id);
      const err = await attachmentOf(store, "alice", ref!.id).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "invalid_request", data: { field: "id", problem: "damaged" } });
      expect(String((err as Error).message)).toContain(`attachment ${ref!.id}`);
      const turn = await new TurnImages(store, "alice").load([ref!]);
      expect(turn).toMatchObject({
        code: "invalid_request",
        data: { attachments: [ref!.id], problem: "damaged" },
      });
    }
    // One row's damage: the database is not set aside at the next start (every conversation
    // would go out of reach for it), and the other image still reads.
    expect(existsSync(damagedMarker(join(dir.path, DB_FILE)))).toBe(false);
    expect((await attachmentOf(store, "alice", other!.id)).bytes).toBeGreaterThan(0);
    store.close();
  });

  test("staging is all or nothing: a write that fails midway leaves none of the turn's images", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.ensureSession("alice", "s", "a", "x", new Date());
    const images = ["A", "B"].map((c) => ({ mime: "image/png", data: Buffer.alloc(2_500_000, c) }));
    let writes = 0;
    const failing = async <T>(work: () => T): Promise<T> => {
      if (++writes === 5) throw new Error("disk full");
      return work();
    };
    const staging = store.conversations.attachments.stage(
      "alice",
      "s",
      images,
      new Date(),
      undefined,
      failing,
    );
    await expect(staging).rejects.toThrow("disk full");
    for (let id = 1; id <= 4; id++) await expect(attachmentOf(store, "alice", id)).rejects.toThrow();
    store.close();
  });

  test("a cancel while staging stops it between parts and leaves none of the turn's images", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.ensureSession("alice", "s", "a", "x", new Date());
    const images = ["A", "B"].map((c) => ({ mime: "image/png", data: Buffer.alloc(2_500_000, c) }));
    const cancel = new AbortController();
    let writes = 0;
    const counting = async <T>(work: () => T): Promise<T> => {
      if (++writes === 2) cancel.abort(new Error("cancelled by the host"));
      return work();
    };
    const staging = store.conversations.attachments.stage(
      "alice",
      "s",
      images,
      new Date(),
      undefined,
      counting,
      cancel.signal,
    );
    await expect(staging).rejects.toThrow("cancelled by the host");
    // Two parts written, then the delete of what was staged: nothing more.
    expect(writes).toBe(3);
    for (let id = 1; id <= 4; id++) await expect(attachmentOf(store, "alice", id)).rejects.toThrow();
    store.close();
  });
});
