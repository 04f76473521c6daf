import { describe, expect, spyOn, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { closeSync, ftruncateSync, mkdirSync, openSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { livePdfThreads } from "../../src/documents/pdf-pages.ts";
import { DocumentStore } from "../../src/store/document-store.ts";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { heavyPage, pdfOf } from "../documents/pdf-raw.ts";
import { threadEnds } from "../documents/thread-ends.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { threadErases } from "../fixtures/interleave.ts";
import { minimalPdf } from "../fixtures/pdf-writer.ts";
import { readDb } from "../fixtures/read-db.ts";

/** A request's terminal message; results are read loosely here (the client types check their shapes). */
async function call(
  h: ChatHarness,
  id: string,
  method: string,
  params: Record<string, unknown>,
): Promise<Msg & { result: any; data?: any; code?: string; message?: string }> {
  h.send(id, method, params);
  return (await h.terminal(id)) as Msg & { result: any };
}

const plain = { agents: [{ name: "plain" }], memory: { enabled: true, top_k: 5 } };

/** Files under `dir` (recursively) holding `marker`. */

/** Chunk rows in the database now, committed or not (read beside the core, as another process would). */
function chunkRows(h: ChatHarness): number {
  const db = readDb(join(h.dataDir, "local-ai.db"));
  try {
    return (db.query("SELECT COUNT(*) AS n FROM memory WHERE document_id IS NOT NULL").get() as { n: number })
      .n;
  } finally {
    db.close();
  }
}

/** A Markdown text of `sections` sections, each a heading and a paragraph naming its number. */
const bigMarkdown = (sections: number, marker: string) =>
  Array.from(
    { length: sections },
    (_, i) => `# Part ${i}\n\n${marker} paragraph ${i} ${"lorem ipsum dolor sit amet ".repeat(40)}`,
  ).join("\n\n");

/** Prose of many distinct words: FTS5's secure-delete costs by the distinct words a row holds. */
function variedMarkdown(sections: number, marker: string): string {
  let seed = 7;
  const word = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed.toString(36);
  };
  return Array.from(
    { length: sections },
    (_, i) => `# Part ${i}\n\n${marker} ${Array.from({ length: 200 }, word).join(" ")}`,
  ).join("\n\n");
}

describe("documents.add, list, delete and citations", () => {
  test("a library document and a session's PDF are recalled and cited; sessions.get shows the sources; delete forgets", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ["first"] }, { content: ["from the docs"] }, { content: ["other"] });
    await h.chat("c0", { input: "hello there", session_id: "s1" });
    const lib = await call(h, "a1", "documents.add", {
      text: "# Zebras\n\nThe QUAGGA was a subspecies of zebra.",
      name: "zebras.md",
    });
    expect(lib.result).toMatchObject({ name: "zebras.md", format: "markdown", chunks: 1 });
    const pdfPath = join(h.dir.path, "manual.pdf");
    writeFileSync(pdfPath, minimalPdf([["Intro page"], ["The QUAGGA manual page two"]]));
    const att = await call(h, "a2", "documents.add", { path: pdfPath, session_id: "s1" });
    expect(att.result).toMatchObject({ name: "manual.pdf", format: "pdf", chunks: 2 });

    const all = await call(h, "l", "documents.list", {});
    expect(all.result.documents.map((d: any) => [d.name, d.session_id]).sort()).toEqual([
      ["manual.pdf", "s1"],
      ["zebras.md", null],
    ]);
    const s1 = await call(h, "l1", "documents.list", { session_id: "s1" });
    expect(s1.result.documents.map((d: any) => d.document_id)).toEqual([att.result.document_id]);

    const chat = await h.chat("c1", { input: "tell me about the quagga", session_id: "s1" });
    const done = chat.events.find((e) => e.event === "memory_done") as any;
    const cited = (done.sources as any[]).map((s) => [s.kind, s.name, s.id, s.chunk]).sort();
    expect(cited).toEqual([
      ["document", "manual.pdf", att.result.document_id, 1],
      ["document", "zebras.md", lib.result.document_id, 0],
    ]);
    expect((chat.terminal as any).result.sources).toEqual(done.sources);
    // The model saw the passages.
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).toContain("QUAGGA manual page two");
    const got = await call(h, "g", "sessions.get", { session_id: "s1" });
    expect(got.result.messages.at(-1)).toMatchObject({ role: "assistant", sources: done.sources });
    expect(got.result.messages.at(-2).sources).toBeUndefined();

    // Another session sees the library only.
    const other = await h.chat("c2", { input: "quagga again", session_id: "s2" });
    const otherDone = other.events.find((e) => e.event === "memory_done") as any;
    expect(otherDone.sources.filter((s: any) => s.kind === "document").map((s: any) => s.id)).toEqual([
      lib.result.document_id,
    ]);

    expect((await call(h, "d", "documents.delete", { document_id: lib.result.document_id })).result).toEqual({
      deleted: true,
    });
    const again = await call(h, "d2", "documents.delete", { document_id: lib.result.document_id });
    expect(again).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "document_not_found" },
    });
    expect(filesHolding(h.dataDir, "subspecies of zebra")).toEqual([]);
  });

  test("a document's name, given or the file's, is kept on one line: line breaks, controls and overrides folded", async () => {
    await using h = new ChatHarness(plain);
    const given = await call(h, "g", "documents.add", {
      text: "The ibis wades.",
      name: "birds\r\n\u001b[31m\u2067.md",
    });
    expect(given.result.name).toBe("birds [31m .md");
    const path = join(h.dir.path, "trip\nnotes\u202e.txt");
    writeFileSync(path, "The heron waits.");
    const file = await call(h, "f", "documents.add", { path });
    expect(file.result.name).toBe("trip notes .txt");
    // A name of nothing else is the text's first words instead.
    const blank = await call(h, "b", "documents.add", { text: "The stork returns.", name: "\n\u0000" });
    expect(blank.result.name).toBe("The stork returns.");
    const listed = await call(h, "l", "documents.list", {});
    expect(listed.result.documents.map((d: any) => d.name).sort()).toEqual([
      "The stork returns.",
      "birds [31m .md",
      "trip notes .txt",
    ]);
  });

  test("bad params and bad files: the code and message a host sees", async () => {
    await using h = new ChatHarness(plain);
    const dir = h.dir.path;
    const file = (name: string, bytes: Uint8Array | string) => {
      writeFileSync(join(dir, name), bytes);
      return join(dir, name);
    };
    const fifo = join(dir, "pipe");
    execFileSync("mkfifo", [fifo]);
    mkdirSync(join(dir, "folder"));
    symlinkSync(join(dir, "loop-b"), join(dir, "loop-a"));
    symlinkSync(join(dir, "loop-a"), join(dir, "loop-b"));
    const huge = join(dir, "huge.txt");
    const fd = openSync(huge, "w");
    ftruncateSync(fd, 1024 ** 3); // sparse: nothing written
    closeSync(fd);
    const cases: [Record<string, unknown>, Record<string, unknown>, RegExp][] = [
      [{}, { data: { field: "path" } }, /exactly one of path and text/],
      [{ text: "x", path: "/x" }, { data: { field: "path" } }, /exactly one/],
      [{ text: "x", session_id: "../up" }, { data: { field: "session_id" } }, /session_id/],
      [{ text: "x", session_id: "nope" }, { data: { reason: "session_not_found" } }, /no session 'nope'/],
      [
        { path: file("bin.dat", new Uint8Array([0, 1, 2, 0, 0, 9, 0])) },
        { data: { reason: "unsupported_format" } },
        /not a format/,
      ],
      [
        { path: file("enc.pdf", minimalPdf([["secret"]], { encrypt: true })) },
        { data: { problem: "encrypted" } },
        /password|encrypt/i,
      ],
      [
        { path: file("scan.pdf", minimalPdf([["x"]], { imageOnly: true })) },
        { data: { problem: "no_text" } },
        /no text/,
      ],
      [
        { path: file("cut.pdf", minimalPdf([["some text here"]]).slice(0, 120)) },
        { data: { problem: "damaged" } },
        /./,
      ],
      [{ path: huge }, { data: { field: "path", problem: "too_large" } }, /1073741824 bytes/],
      // Bombs: a Flate stream of 80 MiB of spaces in ~80 KiB, and more pages than are read
      // (5,000); each refused before the work it would take.
      [{ path: file("flate-bomb.pdf", flateBomb()) }, { data: { problem: "too_large" } }, /./],
      [
        {
          path: file("page-bomb.pdf", minimalPdf(Array.from({ length: 5001 }, () => ["p"]))),
        },
        { data: { problem: "too_large" } },
        /5001 pages/,
      ],
      [{ path: fifo }, { data: { field: "path", problem: "unreadable" } }, /not a file/],
      [{ path: join(dir, "folder") }, { data: { field: "path", problem: "unreadable" } }, /not a file/],
      [
        { path: join(dir, "loop-a") },
        { data: { field: "path", problem: "unreadable" } },
        /loop of symbolic links/,
      ],
      [
        { path: join(dir, "missing.txt") },
        { data: { field: "path", problem: "unreadable" } },
        /no such file/,
      ],
      [{ path: "notes.md" }, { data: { field: "path", problem: "unreadable" } }, /must be absolute/],
      [{ text: "   \n\n  " }, { data: { problem: "no_text" } }, /no text/],
    ];
    for (const [i, [params, data, message]] of cases.entries()) {
      const r = await call(h, `bad${i}`, "documents.add", params);
      expect({ params, r }).toMatchObject({ params, r: { type: "error", code: "invalid_request", ...data } });
      expect(r.message).toMatch(message);
      expect(r.message).not.toContain("    at ");
    }
    // A failed add leaves nothing.
    expect(chunkRows(h)).toBe(0);
    expect((await call(h, "l", "documents.list", { session_id: "nope" })).data).toMatchObject({
      reason: "session_not_found",
    });
    expect((await call(h, "d", "documents.delete", { document_id: "CON" })).data).toMatchObject({
      field: "document_id",
    });
  });

  test("Latin-1 and UTF-16 text, and megabytes of nested HTML, are read and found", async () => {
    await using h = new ChatHarness(plain);
    const dir = h.dir.path;
    writeFileSync(join(dir, "latin.txt"), Buffer.from("Caf\xe9 cr\xe8me BRULEE notes", "latin1"));
    writeFileSync(
      join(dir, "utf16.txt"),
      Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("UTF sixteen PANGOLIN", "utf16le")]),
    );
    writeFileSync(
      join(dir, "deep.html"),
      `<html><body>${"<div>".repeat(300_000)}ARMADILLO deep${"</div>".repeat(300_000)}</body></html>`,
    );
    for (const [i, name, format] of [
      [0, "latin.txt", "text"],
      [1, "utf16.txt", "text"],
      [2, "deep.html", "html"],
    ] as const) {
      const r = await call(h, `a${i}`, "documents.add", { path: join(dir, name) });
      expect(r.result).toMatchObject({ name, format });
    }
    const store = h.services.store();
    expect(store.memory.search("default_user", "crème brulee", 3)[0]?.doc.text).toContain("Café crème");
    expect(store.memory.search("default_user", "pangolin", 3)).toHaveLength(1);
    expect(store.memory.search("default_user", "armadillo", 3)[0]?.doc.text).toBe("ARMADILLO deep");
  });

  test("index_progress while a large document is added, and the loop keeps turning", async () => {
    await using h = new ChatHarness(plain);
    let turns = 0;
    const tick = setInterval(() => turns++, 1);
    const path = join(h.dir.path, "book.pdf");
    writeFileSync(
      path,
      minimalPdf(
        Array.from({ length: 1500 }, (_, i) => [`Page ${i} of the BOOK`, "lorem ipsum ".repeat(60)]),
      ),
    );
    const r = await call(h, "a", "documents.add", { path });
    clearInterval(tick);
    expect(r.result.chunks).toBe(1500);
    const events = h.events("a").map((e) => e as unknown as { phase: string; done: number; total: number });
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) expect(e.done).toBeLessThanOrEqual(e.total);
    expect(turns).toBeGreaterThan(20);
  }, 60_000);

  test("a cancel halfway leaves nothing indexed, and no copy of the text in any file", async () => {
    await using h = new ChatHarness(plain);
    h.services.store();
    // The cancel's module loaded first: the cancel below lands as it is sent, mid-add.
    expect((await call(h, "w", "cancel", { request_id: "nobody" })).result).toEqual({ cancelled: false });
    h.send("a", "documents.add", { text: bigMarkdown(4000, "HALFWAY") });
    while (chunkRows(h) < 500) await new Promise((r) => setTimeout(r, 1));
    h.send("c", "cancel", { request_id: "a" });
    expect(await h.terminal("a")).toMatchObject({ type: "error", code: "cancelled" });
    // The removal goes on behind the answer (a shutdown waits for it).
    await h.services.store().documents.discarding.idle();
    expect(chunkRows(h)).toBe(0);
    expect((await call(h, "l", "documents.list", {})).result.documents).toEqual([]);
    // The chunks stored before the cancel were in the database's log (and the pages an automatic
    // checkpoint copied back), not only in its rows: the discard settles as an erase does.
    expect(filesHolding(h.dataDir, "HALFWAY")).toEqual([]);
  }, 60_000);

  test("a cancelled add's stored chunks are erased off the loop: it answers at once meanwhile", async () => {
    await using h = new ChatHarness(plain);
    h.services.store();
    // The cancel's module loaded first: the cancel below lands as it is sent, mid-add.
    expect((await call(h, "w", "cancel", { request_id: "nobody" })).result).toEqual({ cancelled: false });
    h.send("a", "documents.add", { text: variedMarkdown(3000, "VARIED") });
    while (chunkRows(h) < 600) await Bun.sleep(1);
    using erases = threadErases();
    const onLoop = spyOn(DocumentStore.prototype, "discard");
    let batchesOnLoop: number;
    try {
      h.send("c", "cancel", { request_id: "a" });
      expect(await h.terminal("a")).toMatchObject({ type: "error", code: "cancelled" });
      await h.services.store().documents.discarding.idle();
    } finally {
      batchesOnLoop = onLoop.mock.calls.length;
      onLoop.mockRestore();
    }
    expect(chunkRows(h)).toBe(0);
    // On the loop, 256 such rows a transaction held it ~230 ms here: every batch went to the
    // store's thread, none ran on this one, and the loop answered (pings) while they ran there.
    expect(batchesOnLoop).toBe(0);
    const discards = erases.seen.filter((e) => e.kind === "discard");
    expect(discards.length).toBeGreaterThan(0);
    expect(discards.reduce((n, e) => n + e.pings, 0)).toBeGreaterThan(0);
    expect(filesHolding(h.dataDir, "VARIED")).toEqual([]);
  }, 60_000);

  test("PDFs added together are read one at a time; a cancel ends one mid-page at once, and one waiting its turn", async () => {
    await using h = new ChatHarness(plain);
    h.services.store();
    // A page pdf.js works through for seconds (docs/agent.md "Documents": one PDF read at a time).
    const heavy = join(h.dir.path, "heavy.pdf");
    writeFileSync(heavy, pdfOf([heavyPage()]));
    const light = join(h.dir.path, "light.pdf");
    writeFileSync(light, minimalPdf([["a light page"]]));
    using threads = threadEnds();
    h.send("a", "documents.add", { path: heavy });
    // Once a's thread runs, b waits for its turn.
    while (livePdfThreads() === 0) await Bun.sleep(1);
    h.send("b", "documents.add", { path: light });
    await Bun.sleep(200);
    expect(livePdfThreads()).toBe(1);
    expect(h.out.some((m) => m.id === "b" && m.type !== "event")).toBe(false);
    h.send("cb", "cancel", { request_id: "b" });
    expect(await h.terminal("b")).toMatchObject({ type: "error", code: "cancelled" });
    h.send("ca", "cancel", { request_id: "a" });
    expect(await h.terminal("a")).toMatchObject({ type: "error", code: "cancelled" });
    // The heavy page takes ~2.8 s here: its thread was ended before it answered the page, not
    // waited for (by order, however late a loaded machine hears the thread's end); b had none.
    expect(threads.ends).toEqual([[]]);
    expect((await call(h, "c", "documents.add", { path: light })).result).toMatchObject({ format: "pdf" });
  }, 60_000);

  test("users.delete during an add wins: the add ends cancelled and writes nothing back", async () => {
    await using h = new ChatHarness(plain);
    h.services.store();
    // users.delete's module loaded first: the delete below takes effect as it arrives, not once
    // an import is done (the add's last rows are written some 150 ms after its first).
    await call(h, "w", "users.delete", { user_id: "nobody" });
    h.send("a", "documents.add", { text: bigMarkdown(4000, "ERASEDWORD"), user_id: "ann" });
    while (chunkRows(h) === 0) await new Promise((r) => setTimeout(r, 1));
    const del = await call(h, "d", "users.delete", { user_id: "ann" });
    expect(del.type).toBe("result");
    expect(await h.terminal("a")).toMatchObject({
      type: "error",
      code: "cancelled",
      data: { reason: "user_deleted" },
    });
    expect(chunkRows(h)).toBe(0);
    expect((await call(h, "l", "documents.list", { user_id: "ann" })).result.documents).toEqual([]);
    h.services.store().close();
    expect(filesHolding(h.dataDir, "ERASEDWORD")).toEqual([]);
  }, 60_000);

  test("a stored answer names its sources when shown: a cited session erased leaves no copy of its title", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ["noted"] }, { content: ["answer"] });
    await h.chat("x", { input: "the KOALATITLE sleeps all day", session_id: "x" });
    const y = await h.chat("y", { input: "why does it sleep all day", session_id: "y" });
    expect((y.terminal as any).result.sources).toEqual([
      expect.objectContaining({ kind: "turn", id: "x", name: "the KOALATITLE sleeps all day", chunk: 0 }),
    ]);
    const before = await call(h, "g1", "sessions.get", { session_id: "y" });
    expect(before.result.messages.at(-1).sources[0].name).toBe("the KOALATITLE sleeps all day");
    await call(h, "d", "sessions.delete", { session_id: "x" });
    const after = await call(h, "g2", "sessions.get", { session_id: "y" });
    // The citation goes with the session: its id is the host's name for it, as telling as a title.
    expect(after.result.messages.at(-1).sources).toBeUndefined();
    expect(filesHolding(h.dataDir, "KOALATITLE")).toEqual([]);
  });

  test("a session erased and its id taken again: another session's answer does not cite the new one", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ["noted"] }, { content: ["answer"] }, { content: ["fresh"] });
    await h.chat("x", { input: "the WOMBATTOPIC digs burrows", session_id: "x" });
    const y = await h.chat("y", { input: "why does the WOMBATTOPIC dig", session_id: "y" });
    expect((y.terminal as any).result.sources).toEqual([expect.objectContaining({ kind: "turn", id: "x" })]);
    await call(h, "d", "sessions.delete", { session_id: "x" });
    // The host reuses its name for a new conversation that never answered y.
    await h.chat("x2", { input: "something else entirely", session_id: "x" });
    const got = await call(h, "g", "sessions.get", { session_id: "y" });
    const cited = (got.result.messages.at(-1).sources ?? []) as { id: string; name: string }[];
    expect(cited.filter((s) => s.id === "x")).toEqual([]);
  });

  test("a cited turn replaced by an edit: another answer's citation of it goes, not left naming the new turn at its seq", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script(
      { content: ["noted"] },
      { content: ["answer"] },
      { content: ["sure"] },
      { content: ["ok"] },
    );
    await h.chat("x", { input: "the QUOKKATOPIC smiles at tourists", session_id: "x" });
    await h.chat("x1", { input: "it lives on an island", session_id: "x" });
    const y = await h.chat("y", { input: "why does the QUOKKATOPIC smile", session_id: "y" });
    expect((y.terminal as any).result.sources).toEqual([
      expect.objectContaining({ kind: "turn", id: "x", chunk: 0 }),
    ]);
    // The user edits x's first message: seq 0 is now another message, and x is retitled by it.
    await h.chat("x2", { input: "a note about groceries", session_id: "x", replace_from: 0 });
    const x = await call(h, "gx", "sessions.get", { session_id: "x" });
    expect(x.result.messages[0]).toEqual(
      expect.objectContaining({ seq: 0, content: "a note about groceries" }),
    );
    const got = await call(h, "g", "sessions.get", { session_id: "y" });
    // Left as it was, y's answer cited "a note about groceries" (x's seq 0 and title) as its source.
    const cited = (got.result.messages.at(-1).sources ?? []) as { id: string; chunk: number }[];
    expect(cited.filter((s) => s.id === "x")).toEqual([]);
  });

  test("a cited session edited while the turn that cited it runs: the answer stored after does not cite its replaced turn", async () => {
    await using h = new ChatHarness(plain, { slots: 2 });
    h.llama.script({ content: ["noted"] }, { content: ["ok"] }, { content: ["answer"] });
    await h.chat("x", { input: "the DUGONGTOPIC grazes seagrass", session_id: "x" });
    // Edited once y's prompt has reached the model: y's answer commits after the edit.
    let held: unknown[] = [];
    let edit: Msg | undefined;
    h.llama.beforeChat = async () => {
      h.llama.beforeChat = undefined;
      held = h.events("y").map((e) => e.event);
      edit = (await h.chat("x2", { input: "a note about groceries", session_id: "x", replace_from: 0 }))
        .terminal;
    };
    const y = await h.chat("y", { input: "what does the DUGONGTOPIC graze", session_id: "y" });
    // The race as meant, checked first: the request held was y's, past its recall, and the edit
    // ended committed before y's answer came back. (Its one failure was a suite run that loaded
    // this file, merged in meanwhile, beside the store's modules cached from before the fix.)
    expect(held).toEqual(["run_start", "memory_start", "memory_done", "llm_start"]);
    expect(edit?.type).toBe("result");
    expect(h.out.indexOf(edit as Msg)).toBeLessThan(
      h.out.indexOf(y.events.find((e) => e.event === "llm_chunk") as Msg),
    );
    expect((y.terminal as any).result.sources).toEqual([
      expect.objectContaining({ kind: "turn", id: "x", chunk: 0 }),
    ]);
    const got = await call(h, "g", "sessions.get", { session_id: "y" });
    const cited = (got.result.messages.at(-1).sources ?? []) as { id: string }[];
    expect(cited.filter((s) => s.id === "x")).toEqual([]);
  });

  test("a session erased while a turn that cited it runs: the answer stored after is not left citing it", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ["noted"] }, { content: ["answer"] });
    await h.chat("x", { input: "the NUMBATTOPIC eats termites", session_id: "x" });
    // Erased once the prompt has reached the model: the turn commits after the delete answered.
    h.llama.beforeChat = async () => {
      h.llama.beforeChat = undefined;
      h.send("d", "sessions.delete", { session_id: "x" });
      await h.terminal("d");
    };
    const y = await h.chat("y", { input: "what does the NUMBATTOPIC eat", session_id: "y" });
    expect((y.terminal as any).result.sources).toEqual([
      expect.objectContaining({ kind: "turn", id: "x", name: "" }),
    ]);
    const got = await call(h, "g", "sessions.get", { session_id: "y" });
    expect(got.result.messages.at(-1).sources).toBeUndefined();
  });

  test("a chat's result names its sources as they are then: a document deleted meanwhile leaves no copy of its name", async () => {
    await using h = new ChatHarness(plain);
    const doc = await call(h, "a", "documents.add", {
      text: "The HERONDOC flies south.",
      name: "heron-secrets.md",
    });
    // The delete is sent once the prompt has reached the model, and the reply waits for its
    // answer: the document is erased while the turn runs, whatever the machine's load.
    h.llama.script({ content: ["they", " fly", " south"] });
    h.llama.beforeChat = async () => {
      h.send("d", "documents.delete", { document_id: doc.result.document_id });
      await h.terminal("d");
    };
    const chat = await h.chat("c", { input: "where does the HERONDOC fly", session_id: "s" });
    const done = chat.events.find((e) => e.event === "memory_done") as any;
    expect(done.sources).toEqual([expect.objectContaining({ kind: "document", name: "heron-secrets.md" })]);
    const deleted = h.out.findIndex((m) => m.id === "d" && m.type === "result");
    expect(deleted).toBeGreaterThanOrEqual(0);
    expect(deleted).toBeLessThan(h.out.indexOf(chat.terminal));
    expect(JSON.stringify(h.llama.requests[0]?.body.messages)).toContain("flies south");
    expect((chat.terminal as any).result.sources).toEqual([
      expect.objectContaining({ kind: "document", id: doc.result.document_id, name: "" }),
    ]);
  });

  test("a document deleted while the turn's tool runs is not sent again in its next step", async () => {
    await using h = new ChatHarness({ memory: { enabled: true, top_k: 5 } });
    const doc = await call(h, "a", "documents.add", {
      text: "The HERONDOC dives for fish.",
      name: "herons.md",
    });
    h.llama.script({ tool_calls: [{ name: "t__echo", arguments: { text: "ping" } }] }, { content: ["done"] });
    // Erased once the first step's prompt has gone out: the tool's step follows the delete.
    let asked = 0;
    h.llama.beforeChat = async () => {
      if (asked++ > 0) return;
      h.send("d", "documents.delete", { document_id: doc.result.document_id });
      await h.terminal("d");
    };
    const chat = await h.chat("c", { input: "what does the HERONDOC do", session_id: "s" });
    expect((chat.terminal as any).result.response).toBe("done");
    const sent = h.llama.requests.map((r) => JSON.stringify(r.body.messages));
    expect(sent).toHaveLength(2);
    expect(sent[0]).toContain("dives for fish");
    expect(sent[1]).toContain("ping");
    expect(sent[1]).not.toContain("dives for fish");
    // An earlier step read it: cited, without its name.
    expect((chat.terminal as any).result.sources).toEqual([
      expect.objectContaining({ kind: "document", id: doc.result.document_id, name: "" }),
    ]);
  });

  test("a document deleted while a resumed turn's pending tool runs is not sent in its first step", async () => {
    await using h = new ChatHarness({ memory: { enabled: true, top_k: 5 } });
    const doc = await call(h, "a", "documents.add", {
      text: "The HERONDOC dives for fish.",
      name: "herons.md",
    });
    // An interrupted turn whose call has no result yet: the resume runs it before any request.
    h.writeCheckpoint("s", {
      version: 1,
      trace_id: "0000000000000000",
      user_input: "what does the HERONDOC do",
      agent: "assistant",
      step: 1,
      parse_errors: 0,
      best_text: "",
      turn: [
        { role: "user", content: "what does the HERONDOC do" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "t__echo", arguments: '{"text":"ping"}' } },
          ],
        },
      ],
      updated_at: "2026-01-01T00:00:00.000Z",
    });
    // Erased as the pending call starts: its rows gone before the step after it is laid out.
    h.onEmit = (m) => {
      if (m.event === "tool_start")
        h.services.store().documents.delete("default_user", doc.result.document_id);
    };
    h.llama.script({ content: ["done"] });
    const chat = await h.chat("c", { session_id: "s", resume: true });
    expect((chat.terminal as any).result.response).toBe("done");
    const sent = h.llama.requests.map((r) => JSON.stringify(r.body.messages));
    expect(sent).toHaveLength(1);
    expect(sent[0]).toContain("ping");
    expect(sent[0]).not.toContain("dives for fish");
  });

  test("a document deleted while a chat waits for the slot is not sent to the model, nor cited", async () => {
    await using h = new ChatHarness(plain);
    const doc = await call(h, "a", "documents.add", {
      text: "The HERONDOC nests in reeds.",
      name: "herons.md",
    });
    // Chat "one" holds the only slot until the delete has answered (its request waits at the
    // stand-in); "two", sent once "one" is asking, has recalled the document and waits.
    h.llama.script({ content: ["a", " b"] }, { content: ["fine"] });
    let asking!: () => void;
    const oneAsks = new Promise<void>((r) => {
      asking = r;
    });
    let asked = 0;
    h.llama.beforeChat = async () => {
      if (asked++ > 0) return;
      asking();
      await h.terminal("d");
    };
    h.onEmit = (m) => {
      if (m.id === "two" && m.event === "memory_done")
        h.send("d", "documents.delete", { document_id: doc.result.document_id });
    };
    h.send("one", "chat", { input: "hello there", session_id: "s1" });
    await oneAsks;
    const two = await h.chat("two", { input: "where does the HERONDOC nest", session_id: "s2" });
    await h.terminal("one");
    expect((await h.terminal("d")).result).toEqual({ deleted: true });
    const deleted = h.out.findIndex((m) => m.id === "d" && m.type === "result");
    expect(deleted).toBeLessThan(h.out.findIndex((m) => m.id === "two" && m.event === "llm_start"));
    const done = two.events.find((e) => e.event === "memory_done") as any;
    expect(done.sources.map((s: any) => s.id)).toEqual([doc.result.document_id]);
    // Its prompt went out after the delete answered: without the erased text.
    expect(JSON.stringify(h.llama.requests.at(-1)?.body.messages)).not.toContain("nests in reeds");
    expect((two.terminal as any).result.sources).toEqual([]);
  });

  test("HTML handed in as text, with no name, is named by its text, never its markup", async () => {
    await using h = new ChatHarness(plain);
    const page =
      "<!DOCTYPE html><html><head><title>Q3</title><style>p { color: red }</style></head><body><h1>Quarterly report</h1><p>Revenue rose.</p></body></html>";
    const r = await call(h, "a", "documents.add", { text: page });
    expect(r.result).toMatchObject({ format: "html", name: "Quarterly report Revenue rose." });
  });

  test("documents.list pages as sessions.list does with limit, before and next; no params answers all, as the SPEC", async () => {
    await using h = new ChatHarness(plain);
    const ids: string[] = [];
    for (let i = 0; i < 53; i++)
      ids.push(
        (await call(h, `a${i}`, "documents.add", { text: `note ${i}`, name: `n${i}` })).result.document_id,
      );
    const all = (await call(h, "l0", "documents.list", {})).result;
    expect(all.documents.map((d: any) => d.document_id).sort()).toEqual([...ids].sort());
    expect(all.next).toBeNull();
    const first = (await call(h, "l", "documents.list", { limit: 50 })).result;
    expect(first.documents).toHaveLength(50);
    expect(typeof first.next).toBe("string");
    const rest = (await call(h, "l2", "documents.list", { before: first.next, limit: 50 })).result;
    expect(rest).toMatchObject({ next: null });
    const seen = [...first.documents, ...rest.documents].map((d: any) => d.document_id);
    expect(seen.sort()).toEqual(ids.sort());
    const two = (await call(h, "l3", "documents.list", { limit: 2 })).result;
    expect(two.documents.map((d: any) => d.document_id)).toEqual(
      first.documents.slice(0, 2).map((d: any) => d.document_id),
    );
    for (const [params, field] of [
      [{ limit: 0 }, "limit"],
      [{ limit: 501 }, "limit"],
      [{ before: "not-a-cursor" }, "before"],
      [{ before: "x".repeat(201) }, "before"],
    ] as const) {
      const r = await call(h, `bad-${field}-${JSON.stringify(params).length}`, "documents.list", params);
      expect({ params, r }).toMatchObject({ params, r: { code: "invalid_request", data: { field } } });
    }
  });

  test("each method sees only its user's documents: list, delete, session_id and a chat's recall", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ["ok"] }, { content: ["ok"] });
    await h.chat("c0", { input: "hi", session_id: "ann-s", user_id: "ann" });
    const doc = await call(h, "a", "documents.add", { text: "The OKAPI lives in forests.", user_id: "ann" });
    const ids = async (id: string, user_id?: string) =>
      (await call(h, id, "documents.list", user_id ? { user_id } : {})).result.documents.map(
        (d: any) => d.document_id,
      );
    expect(await ids("l1", "ann")).toEqual([doc.result.document_id]);
    expect(await ids("l2")).toEqual([]);
    // Another user's session is not one of this user's, for an add or a list.
    const add = await call(h, "a2", "documents.add", { text: "x", session_id: "ann-s" });
    expect(add.data).toMatchObject({ field: "session_id", reason: "session_not_found" });
    const list = await call(h, "l3", "documents.list", { session_id: "ann-s", user_id: "bob" });
    expect(list.data).toMatchObject({ reason: "session_not_found" });
    const del = await call(h, "d1", "documents.delete", {
      document_id: doc.result.document_id,
      user_id: "bob",
    });
    expect(del.data).toMatchObject({ field: "document_id", reason: "document_not_found" });
    const chat = await h.chat("c1", { input: "where does the okapi live", session_id: "b", user_id: "bob" });
    const done = chat.events.find((e) => e.event === "memory_done") as any;
    expect(done.sources).toEqual([]);
    expect(await ids("l4", "ann")).toEqual([doc.result.document_id]);
  });

  test("sessions.delete erases its attachments, not the library", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ["ok"] });
    await h.chat("c", { input: "hi", session_id: "s" });
    await call(h, "a1", "documents.add", { text: "ATTACHEDWORD text", session_id: "s" });
    await call(h, "a2", "documents.add", { text: "LIBRARYWORD text" });
    await call(h, "d", "sessions.delete", { session_id: "s" });
    expect((await call(h, "l", "documents.list", {})).result.documents.map((d: any) => d.session_id)).toEqual(
      [null],
    );
    expect(filesHolding(h.dataDir, "ATTACHEDWORD")).toEqual([]);
    expect(filesHolding(h.dataDir, "LIBRARYWORD").length).toBeGreaterThan(0);
  });
});

/** A PDF whose one stream inflates to 80 MiB (its text would be spaces), about 80 KiB on disk. */
function flateBomb(): Buffer {
  const head = "%PDF-1.4\n1 0 obj\n<< /Length 0 /Filter /FlateDecode >>\nstream\n";
  return Buffer.concat([
    Buffer.from(head, "latin1"),
    deflateSync(Buffer.alloc(80 * 1024 * 1024, 0x20)),
    Buffer.from("\nendstream\nendobj\n%%EOF\n"),
  ]);
}
