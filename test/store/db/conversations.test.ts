import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { TurnMessage } from "../../../src/store/conversations.ts";
import { exportInline, exportToFile } from "../../../src/store/export-file.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

let clock = Date.parse("2026-12-01T08:00:00Z");
const tick = () => {
  clock += 1000;
  return new Date(clock);
};

function turn(
  store: Store,
  u: string,
  s: string,
  input: string,
  answer: string,
  extra: Partial<Parameters<Store["conversations"]["commitTurn"]>[0]> = {},
) {
  const messages: TurnMessage[] = [
    { role: "user", content: input },
    { role: "assistant", content: answer },
  ];
  return store.conversations.commitTurn({
    userId: u,
    sessionId: s,
    agent: "assistant",
    messages,
    memoryText: `${input}\n${answer}`,
    at: tick(),
    ...extra,
  });
}

describe("conversations in the database", () => {
  test("a turn is appended with seqs, the session counted, titled from its first message and previewed", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    expect(
      turn(
        store,
        "u",
        "s1",
        "Plan a trip to Lisbon in spring, with a day in Sintra and one at the coast please",
        "Day 1: Alfama.",
      ),
    ).toBe(0);
    const second = store.conversations.commitTurn({
      userId: "u",
      sessionId: "s1",
      agent: "travel",
      messages: [
        { role: "user", content: "and the weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Lisbon"}' } },
          ],
          reasoning: "I should look it up",
          usage: { prompt_tokens: 30 },
        },
        { role: "tool", tool_call_id: "c1", content: "sunny, 21 °C" },
        { role: "assistant", content: "Sunny and mild." },
      ],
      at: tick(),
    });
    expect(second).toBe(2);
    const s = store.mustFind("u", "s1");
    expect(s.title).toBe("Plan a trip to Lisbon in spring, with a day in Sintra and…");
    expect(s.message_count).toBe(6);
    expect(s.agent).toBe("travel");
    expect(s.preview).toBe("Sunny and mild.");
    expect(store.conversations.history("u", "s1")).toEqual([
      {
        role: "user",
        content: "Plan a trip to Lisbon in spring, with a day in Sintra and one at the coast please",
      },
      { role: "assistant", content: "Day 1: Alfama." },
      { role: "user", content: "and the weather?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "weather", arguments: '{"city":"Lisbon"}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "sunny, 21 °C" },
      { role: "assistant", content: "Sunny and mild." },
    ]);
    const page = store.get("u", "s1", 2);
    expect(page.messages.map((m) => m.seq)).toEqual([4, 5]);
    expect(page.has_more).toBe(true);
    const older = store.get("u", "s1", 10, 4);
    expect(older.messages.map((m) => m.seq)).toEqual([0, 1, 2, 3]);
    expect(older.has_more).toBe(false);
    expect(older.messages[3]).toMatchObject({
      reasoning: "I should look it up",
      usage: { prompt_tokens: 30 },
      content: null,
    });
    store.close();
  });

  test("sessions.list pages newest first with a cursor, and only the user's own sessions", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (let i = 0; i < 5; i++) turn(store, "u", `s${i}`, `question ${i}`, `answer ${i}`);
    turn(store, "other", "x", "not yours", "no");
    const first = store.list("u", 2);
    expect(first.sessions.map((s) => s.session_id)).toEqual(["s4", "s3"]);
    const second = store.list("u", 2, first.next as string);
    expect(second.sessions.map((s) => s.session_id)).toEqual(["s2", "s1"]);
    const last = store.list("u", 2, second.next as string);
    expect(last.sessions.map((s) => s.session_id)).toEqual(["s0"]);
    expect(last.next).toBeNull();
    // a cursor from another user's listing only places the page in time
    const theirs = store.list("other", 1);
    expect(
      store.list("u", 10, encodeOtherCursor(theirs)).sessions.every((s) => s.session_id.startsWith("s")),
    ).toBe(true);
    expect(() => store.list("u", 2, "not-a-cursor")).toThrow(/params.before/);
    store.close();
  });

  test("rename keeps the title past later turns; an unknown session is session_not_found", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "s", "first", "one");
    expect((await store.rename("u", "s", 'My "quoted"\ntitle')).title).toBe('My "quoted"\ntitle');
    turn(store, "u", "s", "second", "two");
    expect(store.mustFind("u", "s").title).toBe('My "quoted"\ntitle');
    await expect(store.rename("u", "nope", "x")).rejects.toMatchObject({
      code: "invalid_request",
      data: { reason: "session_not_found" },
    });
    expect(() => store.get("other", "s", 10)).toThrow(/no session 's'/);
    store.close();
  });

  test("an edit replaces the tail from a seq: messages and their memory go, the title follows the new first message", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "s", "tell me about owls", "owls are birds");
    turn(store, "u", "s", "and penguins", "penguins swim");
    turn(store, "u", "s", "what about bats", "bats fly", { replaceFromSeq: 2 });
    expect(store.conversations.history("u", "s").map((m) => m.content)).toEqual([
      "tell me about owls",
      "owls are birds",
      "what about bats",
      "bats fly",
    ]);
    expect(store.memory.search("u", "penguins", 5)).toEqual([]);
    expect(store.memory.search("u", "bats", 5).map((h) => h.doc.text)).toEqual(["what about bats\nbats fly"]);
    turn(store, "u", "s", "actually, foxes", "foxes are canids", { replaceFromSeq: 0 });
    expect(store.mustFind("u", "s")).toMatchObject({ title: "actually, foxes", message_count: 2 });
    store.close();
  });

  // A regenerate of a message of images alone (input "") whose new answer is empty (a thinking
  // model cut off) gives the turn no text to preview: the session kept the replaced answer as
  // its preview, shown by sessions.list and kept in the database, after the edit had erased it.
  test("an edit whose turn has no text to preview leaves none of the replaced tail in the preview", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "s", "tell me about owls", "owls are birds");
    turn(store, "u", "s", "", "the photo shows my passport");
    expect(store.mustFind("u", "s").preview).toBe("the photo shows my passport");
    turn(store, "u", "s", "", "", { replaceFromSeq: 2 });
    expect(store.mustFind("u", "s").preview).toBe("owls are birds");
    turn(store, "u", "s", "", "", { replaceFromSeq: 0 });
    expect(store.mustFind("u", "s").preview).toBe("");
    store.close();
  });

  test("memory recalls the user's other sessions and the folders, ranked, never another user's", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "a", "my cat is called Miso", "noted");
    turn(store, "u", "b", "the cat likes fish and the dog likes bones", "ok");
    turn(store, "u", "c", "what is my cat called", "Miso");
    turn(store, "v", "z", "my cat is called Tom", "noted");
    const hits = store.memory.search("u", "what is my cat called Miso", 5, "c");
    expect(hits.map((h) => h.doc.source)).toEqual(["session:a", "session:b"]);
    expect(hits[0]?.score).toBeGreaterThan(hits[1]?.score as number);
    expect(store.memory.search("u", "   ", 5)).toEqual([]);
    expect(store.memory.search("u", "cat", 0)).toEqual([]);
    store.close();
  });

  test("search finds the user's messages with a snippet; query syntax in the input is only words", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "a", "how do I bake sourdough bread", "feed the starter first");
    turn(store, "u", "b", "bread or rice?", "rice");
    turn(store, "v", "c", "sourdough bread", "mine");
    const hits = await store.search("u", "sourdough bre", 10);
    expect(hits).toEqual([
      {
        session_id: "a",
        seq: 0,
        title: "how do I bake sourdough bread",
        snippet: "how do I bake **sourdough** **bread**",
      },
    ]);
    for (const hostile of [
      '"',
      "NEAR(a b)",
      "a* OR -b",
      "content:x",
      "'; DROP TABLE messages; --",
      "\u{d800}",
    ])
      expect(await store.search("u", hostile, 5)).toBeArray();
    expect((await store.search("u", "bread", 10)).map((h) => h.session_id).sort()).toEqual(["a", "b"]);
    store.close();
  });

  test("export as markdown and json", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "s", "show me ``` fences", "```js\nx\n```");
    const md = await exportInline(store.exportPieces("u", "s", "markdown"));
    expect(md).toContain("# show me ``` fences");
    expect(md).toContain("## User · ");
    expect(md).toContain("```js\nx\n```");
    const json = JSON.parse(await exportInline(store.exportPieces("u", "s", "json")));
    expect(json.session.session_id).toBe("s");
    expect(json.messages.map((m: { role: string }) => m.role)).toEqual(["user", "assistant"]);
    store.close();
  });

  // One message is one slice: its Markdown, 0.3 s for 8 MiB, was built whole while the loop
  // waited. It now comes in pieces of about 256 Ki characters (PIECE_CHARS) with the loop freed
  // between them: none over 1 MiB here, where the message's text is over 2 MiB.
  test("a huge message's Markdown comes in bounded pieces, a long line's too, escaped as before", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const lines = 300_000;
    const long = 300_000;
    turn(store, "u", "s", `${"x<y\n".repeat(lines)}${"<a ".repeat(long)}`, "ok");
    const pieces: string[] = [];
    for await (const piece of store.exportPieces("u", "s", "markdown")) pieces.push(piece);
    expect(Math.max(...pieces.map((p) => p.length))).toBeLessThanOrEqual(1024 * 1024);
    const md = pieces.join("");
    expect(md.split("x\\<y\n").length - 1).toBe(lines);
    expect(md.split("\\<a ").length - 1).toBe(long);
    store.close();
  });

  test("a delete during an export fails it, even when a chat has made the session again since", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    // Over one slice (about 1 MiB of messages), so the export yields between reads.
    for (let i = 0; i < 4; i++) turn(store, "u", "s", `erased ${i} ${"x".repeat(600_000)}`, "ok");
    const pieces = store.exportPieces("u", "s", "json")[Symbol.asyncIterator]();
    await pieces.next();
    await pieces.next();
    await store.deleteSession("u", "s");
    turn(store, "u", "s", "a new conversation", "fresh");
    const rest = (async () => {
      for (let r = await pieces.next(); !r.done; r = await pieces.next());
    })();
    await expect(rest).rejects.toMatchObject({ data: { reason: "session_not_found" } });
    // Unrelated erases do not fail an export.
    turn(store, "u", "other", "keep", "me");
    turn(store, "u", "gone", "bye", "bye");
    const json = store.exportPieces("u", "other", "json");
    await json.next();
    await store.deleteSession("u", "gone");
    let text = "";
    for await (const piece of json) text += piece;
    expect(text).toContain('"keep"');
    store.close();
  });

  test("an edit under an export that replaces rows it gave fails it (session_edited); a turn appended does not", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    // Over one slice (about 1 MiB of messages), so the export yields between reads.
    for (let i = 0; i < 4; i++) turn(store, "u", "s", `before ${i} ${"x".repeat(600_000)}`, `old ${i}`);
    const edited = store.exportPieces("u", "s", "json")[Symbol.asyncIterator]();
    await edited.next();
    await edited.next();
    turn(store, "u", "s", "edited from the start", "new answer", { replaceFromSeq: 0 });
    const rest = (async () => {
      for (let r = await edited.next(); !r.done; r = await edited.next());
    })();
    await expect(rest).rejects.toMatchObject({ code: "internal_error", data: { reason: "session_edited" } });

    for (let i = 0; i < 3; i++) turn(store, "u", "s", `more ${i} ${"y".repeat(600_000)}`, `later ${i}`);
    const appended = store.exportPieces("u", "s", "json");
    let text = "";
    for await (const piece of appended) {
      if (text === "") turn(store, "u", "s", "appended meanwhile", "fine");
      text += piece;
    }
    const seqs = JSON.parse(text).messages.map((m: { seq: number }) => m.seq);
    expect(seqs).toEqual([...seqs.keys()]);
    expect(text).toContain("edited from the start");
    store.close();
  });

  /**
   * Session "s" of "u" exported in Markdown to a file in a folder of its own, `after` run once
   * every piece was handed over (while the tail is written and synced): the export's failure and
   * what the folder then holds.
   */
  async function exportThen(after: (store: Store) => unknown) {
    using dir = tmpdir();
    const store = Store.open(join(dir.path, "data"));
    turn(store, "u", "s", "private words", "answer");
    const pieces = store.exportPieces("u", "s", "markdown");
    async function* then(): AsyncGenerator<string> {
      yield* pieces;
      await after(store);
    }
    const out = join(dir.path, "out");
    mkdirSync(out);
    const err = await exportToFile(join(out, "s.md"), then(), join(dir.path, "data"), pieces.confirm).catch(
      (e) => e,
    );
    const left = readdirSync(out);
    store.close();
    return { err, left };
  }

  test("a delete that lands after the export's last piece, while it is written and synced, leaves no file", async () => {
    const { err, left } = await exportThen((store) => store.deleteSession("u", "s"));
    expect(err).toMatchObject({ data: { reason: "session_not_found" } });
    expect(left).toEqual([]);
  });

  // The edit erased those words for good (its answer came first): a file holding them, written
  // after it, kept what the user took back, as a delete there would have.
  test("an edit of rows it read that lands after the export's last piece fails it (session_edited), no file", async () => {
    const { err, left } = await exportThen((store) =>
      turn(store, "u", "s", "taken back", "new answer", { replaceFromSeq: 0 }),
    );
    expect(err).toMatchObject({ data: { reason: "session_edited" } });
    expect(left).toEqual([]);
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "u", "s", "private words", "answer");
    // Inline: edited once the last slice was read, before the tail.
    const inline = store.exportPieces("u", "s", "markdown");
    const gathered = (async () => {
      for await (const piece of inline)
        if (piece.includes("answer")) turn(store, "u", "s", "taken back", "new", { replaceFromSeq: 0 });
    })();
    await expect(gathered).rejects.toMatchObject({ data: { reason: "session_edited" } });
    store.close();
  });

  test("big, odd text survives: 64 KiB, quotes, newlines, lone surrogates", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const big = `${"x".repeat(65536)}"'\n\r\t`;
    turn(store, "u", "s", big, "lone \u{d800} surrogate");
    const h = store.conversations.history("u", "s");
    expect(h[0]?.content).toBe(big);
    expect(typeof h[1]?.content).toBe("string");
    store.close();
  });
});

function encodeOtherCursor(page: {
  next: string | null;
  sessions: { updated_at: string; session_id: string }[];
}): string {
  const s = page.sessions[0] as { updated_at: string; session_id: string };
  return Buffer.from(JSON.stringify([Date.parse(s.updated_at), s.session_id])).toString("base64url");
}
