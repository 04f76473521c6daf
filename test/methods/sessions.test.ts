import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { renameSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { heldImages } from "../../src/images/held.ts";
import { MAX_HELD_IMAGE_BYTES } from "../../src/images/limits.ts";
import { Store } from "../../src/store/store.ts";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { png } from "../fixtures/images.ts";

/** A request's terminal message; results are read loosely here (the client types check their shapes). */
async function call(
  h: ChatHarness,
  id: string,
  method: string,
  params: Record<string, unknown>,
): Promise<Msg & { result: any }> {
  h.send(id, method, params);
  return (await h.terminal(id)) as Msg & { result: any };
}

describe("sessions.* and users.delete over the protocol", () => {
  test("list, get, rename, search and export what chats wrote", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
    h.llama.script({ content: ["Paris."] }, { content: ["Rome."] }, { content: ["Ottawa."] });
    await h.chat("a", { input: "What is the capital of France?", session_id: "fr" });
    await h.chat("b", { input: "And of Italy?", session_id: "fr" });
    await h.chat("c", { input: "Capital of Canada, please", session_id: "ca" });

    const list = await call(h, "l", "sessions.list", {});
    expect(list.result.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["ca", "fr"]);
    expect(list.result.sessions[1]).toMatchObject({
      title: "What is the capital of France?",
      agent: "plain",
      message_count: 4,
      preview: "Rome.",
    });
    expect(list.result.next).toBeNull();
    const page = await call(h, "l1", "sessions.list", { limit: 1 });
    expect(page.result.sessions).toHaveLength(1);
    const rest = await call(h, "l2", "sessions.list", { limit: 1, before: page.result.next });
    expect(rest.result.sessions[0].session_id).toBe("fr");

    const got = await call(h, "g", "sessions.get", { session_id: "fr" });
    expect(
      got.result.messages.map((m: { seq: number; role: string; content: string }) => [
        m.seq,
        m.role,
        m.content,
      ]),
    ).toEqual([
      [0, "user", "What is the capital of France?"],
      [1, "assistant", "Paris."],
      [2, "user", "And of Italy?"],
      [3, "assistant", "Rome."],
    ]);
    expect(got.result.has_more).toBe(false);
    const older = await call(h, "g2", "sessions.get", { session_id: "fr", limit: 2, before_seq: 2 });
    expect(older.result.messages.map((m: { seq: number }) => m.seq)).toEqual([0, 1]);

    const renamed = await call(h, "r", "sessions.rename", { session_id: "fr", title: "Capitals" });
    expect(renamed.result.session.title).toBe("Capitals");
    const hits = await call(h, "s", "sessions.search", { query: "capital" });
    expect(
      hits.result.hits.map((x: { session_id: string; seq: number }) => `${x.session_id}:${x.seq}`).sort(),
    ).toEqual(["ca:0", "fr:0"]);
    const md = await call(h, "e", "sessions.export", { session_id: "fr", format: "markdown" });
    expect(md.result.format).toBe("markdown");
    expect(md.result.content).toContain("# Capitals");
    const json = await call(h, "j", "sessions.export", { session_id: "fr", format: "json" });
    expect(JSON.parse(json.result.content).messages).toHaveLength(4);
  });

  test("bad params name their field; an unknown session is session_not_found", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    for (const [i, [method, params, field]] of (
      [
        ["sessions.list", { limit: 0 }, "limit"],
        ["sessions.list", { limit: -3 }, "limit"],
        ["sessions.list", { limit: 10_000_000 }, "limit"],
        ["sessions.list", { before: "garbage" }, "before"],
        ["sessions.get", { session_id: "../x" }, "session_id"],
        ["sessions.get", {}, "session_id"],
        ["sessions.rename", { session_id: "s", title: "" }, "title"],
        ["sessions.rename", { session_id: "s", title: "a\u0000b" }, "title"],
        ["sessions.rename", { session_id: "s", title: "line\nbreak" }, "title"],
        ["sessions.rename", { session_id: "s", title: "\u202Egnp.exe" }, "title"],
        // Blank: a list would show an empty row, as for the empty title refused above.
        ["sessions.rename", { session_id: "s", title: "   " }, "title"],
        ["sessions.rename", { session_id: "s", title: "\u3000\u00a0\u200b\ufeff" }, "title"],
        ["sessions.search", { query: "" }, "query"],
        ["sessions.export", { session_id: "s", format: "pdf" }, "format"],
        ["users.delete", { user_id: "CON" }, "user_id"],
      ] as const
    ).entries()) {
      // An id of its own: the harness finds an answer by id, and one field is tried several ways.
      const r = await call(h, `${method}${field}${i}`, method, params);
      expect({ method, field, r }).toMatchObject({
        method,
        field,
        r: { type: "error", code: "invalid_request" },
      });
      expect(r.message).toContain(field);
      expect((r as { data?: { field?: string } }).data?.field).toBe(field);
    }
    // Spaces of any kind and emoji sequences (a zero-width joiner) are text: past validation here.
    const spaced = await call(h, "sp", "sessions.rename", { session_id: "s", title: "a\u00a0b 👩‍👩‍👧" });
    expect(spaced.data).toMatchObject({ reason: "session_not_found" });
    for (const [method, more] of [
      ["sessions.get", {}],
      ["sessions.rename", { title: "t" }],
      ["sessions.delete", {}],
      ["sessions.export", { format: "json" }],
    ] as const) {
      const r = await call(h, `nf-${method}`, method, { session_id: "nope", ...more });
      expect(r).toMatchObject({
        type: "error",
        code: "invalid_request",
        data: { reason: "session_not_found" },
      });
    }
    // A user with nothing to delete is not an error.
    expect((await call(h, "u", "users.delete", { user_id: "ghost" })).result).toEqual({
      deleted_sessions: 0,
      set_aside_copies: [],
    });
  });

  test("sessions.delete of a session only a database set aside holds erases it there, and answers session_not_found", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["noted"] }, { content: ["kept"] });
    await h.chat("a", { input: "the NARWHAL plan", session_id: "gone" });
    await h.chat("b", { input: "the OKAPI plan", session_id: "kept" });
    // The database as a reset after damage sets it aside, then the live one without the session.
    const copy = join(h.dataDir, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    const before = join(h.dir.path, "before.db");
    const db = new Database(join(h.dataDir, "local-ai.db"));
    db.run("VACUUM INTO ?", [before]);
    db.close();
    await h.services.store().deleteSession("default_user", "gone");
    renameSync(before, copy);
    expect(filesHolding(h.dataDir, "NARWHAL")).toEqual([basename(copy)]);
    const r = await call(h, "d", "sessions.delete", { session_id: "gone" });
    expect(r).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: {
        reason: "session_not_found",
        set_aside_copies: [{ path: copy, outcome: "scrubbed", deleted_sessions: 1 }],
      },
    });
    expect(filesHolding(h.dataDir, "NARWHAL")).toEqual([]);
    expect(filesHolding(h.dataDir, "OKAPI").length).toBeGreaterThan(0);
  });

  test("sessions.delete and users.delete take the sessions away from list and search", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["one"] }, { content: ["two"] }, { content: ["three"] });
    await h.chat("a", { input: "alpha question", session_id: "a", user_id: "ann" });
    await h.chat("b", { input: "beta question", session_id: "b", user_id: "ann" });
    await h.chat("c", { input: "gamma question", session_id: "c", user_id: "bob" });
    expect((await call(h, "d", "sessions.delete", { user_id: "ann", session_id: "a" })).result).toEqual({
      deleted: true,
      set_aside_copies: [],
    });
    const left = await call(h, "l", "sessions.list", { user_id: "ann" });
    expect(left.result.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["b"]);
    expect((await call(h, "s", "sessions.search", { user_id: "ann", query: "alpha" })).result.hits).toEqual(
      [],
    );
    expect((await call(h, "u", "users.delete", { user_id: "ann" })).result).toEqual({
      deleted_sessions: 1,
      set_aside_copies: [],
    });
    expect((await call(h, "l2", "sessions.list", { user_id: "ann" })).result.sessions).toEqual([]);
    expect((await call(h, "l3", "sessions.list", { user_id: "bob" })).result.sessions).toHaveLength(1);
  });
});

describe("chat: regenerate and replace_from", () => {
  test("regenerate replaces the last answer; replace_from edits a question and drops what followed", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script(
      { content: ["first answer"] },
      { content: ["second answer"] },
      { content: ["a better second answer"] },
      { content: ["answer to the edit"] },
    );
    await h.chat("1", { input: "question one", session_id: "s" });
    await h.chat("2", { input: "question two", session_id: "s" });
    const again = await h.chat("3", { session_id: "s", regenerate: true });
    expect(again.terminal.result).toMatchObject({ response: "a better second answer" });
    expect(again.events[0]).toMatchObject({ event: "run_start", user_input: "question two" });
    // The model saw the history before the replaced answer, and the question once.
    expect(h.llama.requests[2]?.body.messages.map((m) => m.content)).toEqual([
      "You are a helpful assistant.",
      "question one",
      "first answer",
      "question two",
    ]);
    let got = await call(h, "g", "sessions.get", { session_id: "s" });
    expect(got.result.messages.map((m: { content: string }) => m.content)).toEqual([
      "question one",
      "first answer",
      "question two",
      "a better second answer",
    ]);
    const edit = await h.chat("4", { session_id: "s", replace_from: 0, input: "question one, edited" });
    expect(edit.terminal.result).toMatchObject({ response: "answer to the edit" });
    got = await call(h, "g2", "sessions.get", { session_id: "s" });
    expect(got.result.messages.map((m: { seq: number; content: string }) => [m.seq, m.content])).toEqual([
      [0, "question one, edited"],
      [1, "answer to the edit"],
    ]);
    expect(got.result.session.title).toBe("question one, edited");
  });

  test("refused with invalid_request when they do not apply, the session untouched", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["ok"] });
    await h.chat("1", { input: "hello", session_id: "s" });
    const cases: [Record<string, unknown>, string][] = [
      [{ session_id: "s", regenerate: true, input: "x" }, "input"],
      [{ session_id: "s", replace_from: 0 }, "input"],
      [{ session_id: "s", replace_from: 1, input: "x" }, "replace_from"],
      [{ session_id: "s", replace_from: 99, input: "x" }, "replace_from"],
      [{ session_id: "s", regenerate: true, replace_from: 0 }, "regenerate"],
      [{ session_id: "s", regenerate: true, resume: true }, "resume"],
      [{ regenerate: true }, "session_id"],
      [{ session_id: "s", replace_from: -1, input: "x" }, "replace_from"],
      [{ session_id: "s", regenerate: "yes" }, "regenerate"],
    ];
    for (const [i, [params, field]] of cases.entries()) {
      const { terminal } = await h.chat(`bad${i}`, params);
      expect({ params, terminal }).toMatchObject({
        params,
        terminal: { type: "error", code: "invalid_request" },
      });
      expect(terminal.message).toContain(field);
    }
    const unknown = await h.chat("u", { session_id: "nope", regenerate: true });
    expect(unknown.terminal).toMatchObject({
      code: "invalid_request",
      data: { reason: "session_not_found" },
    });
    expect(h.history("s").map((m) => m.content)).toEqual(["hello", "ok"]);
  });

  test("a rewrite while a turn of the session is in flight is refused, not queued", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["first"] }, { content: ["slow", " reply"] });
    await h.chat("1", { input: "one", session_id: "s" });
    // The rewrite is asked, and answered, while turn 2's request waits at the stand-in.
    let r: Awaited<ReturnType<ChatHarness["chat"]>> | undefined;
    h.llama.beforeChat = async () => {
      r = await h.chat("3", { session_id: "s", regenerate: true });
    };
    h.send("2", "chat", { input: "two", session_id: "s" });
    await h.terminal("2");
    if (!r) throw new Error("the rewrite was not asked");
    expect(r.terminal).toMatchObject({ type: "error", code: "invalid_request" });
    expect(r.terminal.message).toContain("in flight");
    expect((await h.terminal("2")).result).toMatchObject({ response: "slow reply" });
  });
});

describe("a delete wins over a turn in flight", () => {
  /** A chat of session `s` streaming, the first turn of `s` already committed: its reply, once
   *  streamed, goes silent until the chat leaves it, so only the delete ends it, whatever the
   *  machine's load. */
  async function streaming(h: ChatHarness, user = "default_user"): Promise<void> {
    h.llama.script({ content: ["first"] }, { content: ["slow", " SECRET", " reply"], hang: true });
    await h.chat("1", { input: "one", session_id: "s", user_id: user });
    h.send("2", "chat", { input: "two SECRET", session_id: "s", user_id: user });
    await h.waitFor((m) => m.id === "2" && m.event === "llm_chunk");
  }

  async function expectGone(h: ChatHarness, user = "default_user"): Promise<void> {
    const t = await h.terminal("2");
    expect(t).toMatchObject({ type: "error", code: "cancelled", data: { reason: "session_deleted" } });
    const got = await call(h, "g", "sessions.get", { session_id: "s", user_id: user });
    expect(got).toMatchObject({ type: "error", data: { reason: "session_not_found" } });
    expect(h.checkpoint("s", user)).toBeUndefined();
    expect((await call(h, "f", "sessions.search", { query: "SECRET", user_id: user })).result.hits).toEqual(
      [],
    );
  }

  test("sessions.delete stops the turn; nothing of the session is written after it answered", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    await streaming(h);
    // A chat queued behind the streaming one, for the same session, goes with it.
    h.llama.script({ content: ["queued SECRET answer"] });
    h.send("3", "chat", { input: "three SECRET", session_id: "s" });
    await Bun.sleep(50);
    expect((await call(h, "d", "sessions.delete", { session_id: "s" })).result).toEqual({
      deleted: true,
      set_aside_copies: [],
    });
    await expectGone(h);
    expect(await h.terminal("3")).toMatchObject({ code: "cancelled", data: { reason: "session_deleted" } });
  });

  test("a delete answered while the chat waits for llama-server's spawn stops it: the session is not made again", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["first"] }, { content: ["late SECRET reply"] });
    await h.chat("1", { input: "one", session_id: "s" });
    // A cold start: the turn lets the spawn go first (up to 250 ms) before it opens the database.
    let spawn = () => {};
    h.provider.nextPrestart = { spawned: new Promise<void>((r) => (spawn = r)) };
    const { promise: asked, resolve } = Promise.withResolvers<void>();
    const prestart = h.provider.prestart.bind(h.provider);
    h.provider.prestart = () => {
      resolve();
      return prestart();
    };
    h.send("2", "chat", { input: "two SECRET", session_id: "s" });
    await asked;
    expect((await call(h, "d", "sessions.delete", { session_id: "s" })).result).toMatchObject({
      deleted: true,
    });
    spawn();
    await expectGone(h);
    expect(h.llama.requests).toHaveLength(1);
  });

  test("a delete read just after a chat whose method was still loading stops that chat", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    // The delete's module loaded in this core, the chat's not yet: the chat's run waits for its load.
    expect((await call(h, "w", "sessions.list", {})).result.sessions).toEqual([]);
    h.llama.script({ content: ["late SECRET reply"] });
    h.send("2", "chat", { input: "two SECRET", session_id: "s" });
    await call(h, "d", "sessions.delete", { session_id: "s" });
    await expectGone(h);
    expect(h.llama.requests).toHaveLength(0);
  });

  test("users.delete stops the user's turns the same way", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    await streaming(h, "ann");
    expect((await call(h, "d", "users.delete", { user_id: "ann" })).result).toMatchObject({
      deleted_sessions: 1,
    });
    await expectGone(h, "ann");
  });

  test("users.delete answered while a chat naming no session waits for its images' room stops it", async () => {
    await using h = new ChatHarness(
      { agents: [{ name: "plain" }] },
      { standIn: () => ({ vision: { tokensPerImage: 64 } }) },
    );
    h.llama.script({ content: ["first"] }, { content: ["late SECRET reply"] });
    // The chat's modules loaded first: the chat below reaches its wait before the delete is read.
    await h.chat("1", { input: "one", user_id: "ann" });
    const file = join(h.dir.path, "shot.png");
    writeFileSync(file, png(4, 4));
    // Another chat's images hold all the room: this one waits, its session not yet named.
    const release = await heldImages.acquire(MAX_HELD_IMAGE_BYTES, new AbortController().signal);
    try {
      h.send("2", "chat", { input: "two SECRET", user_id: "ann", images: [{ path: file }] });
      expect((await call(h, "d", "users.delete", { user_id: "ann" })).result).toMatchObject({
        deleted_sessions: 1,
      });
    } finally {
      release();
    }
    expect(await h.terminal("2")).toMatchObject({ code: "cancelled", data: { reason: "user_deleted" } });
    expect((await call(h, "l", "sessions.list", { user_id: "ann" })).result.sessions).toEqual([]);
    expect(h.llama.requests).toHaveLength(1);
  });

  test("a delete from a second core on the same data folder refuses the turn's commit", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["first"] }, { content: ["slow", " SECRET", " reply"] });
    await h.chat("1", { input: "one", session_id: "s" });
    // The turn's reply waits at the stand-in until the other core's delete is done: the turn
    // ends, and would commit, after it.
    const { promise: asked, resolve: ask } = Promise.withResolvers<void>();
    const { promise: deleted, resolve: done } = Promise.withResolvers<void>();
    h.llama.beforeChat = () => {
      ask();
      return deleted;
    };
    h.send("2", "chat", { input: "two SECRET", session_id: "s" });
    await asked;
    const other = Store.open(h.dataDir);
    try {
      expect((await other.deleteSession("default_user", "s")).deleted).toBe(true);
    } finally {
      other.close();
      done();
    }
    await expectGone(h);
  });
});
