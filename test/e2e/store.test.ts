import { describe, expect, test } from "bun:test";
import { cpSync, existsSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 20 through the compiled binary: the 0.1 data folder imported, erasing for good, two
// cores on one data folder, and SIGKILL of the core while turns commit.
const V01 = join(import.meta.dir, "..", "fixtures", "data-v01", "users");
const onPosix = process.platform !== "win32";

describe.skipIf(!onPosix)("conversations in the database, through the compiled binary", () => {
  test("a data folder the 0.1 core wrote is imported once: histories, memory, an interrupted turn resumable", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    cpSync(V01, join(stack.dataDir, "users"), { recursive: true });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const list = await core.request({ id: 1, method: "sessions.list", params: { user_id: "ann" } });
    expect(list.result.sessions.map((s: { session_id: string }) => s.session_id).sort()).toEqual([
      "cut",
      "trip",
    ]);
    const trip = await core.request({
      id: 2,
      method: "sessions.get",
      params: { user_id: "ann", session_id: "trip" },
    });
    expect(trip.result.messages.map((m: { content: string }) => m.content)).toEqual([
      "Where should I travel in Portugal?",
      "Porto is lovely in spring.",
      "How do I get to Braga?",
      "Take the train to Braga.",
    ]);
    expect(trip.result.session.title).toBe("Where should I travel in Portugal?");
    const resumed = await core.request({
      id: 3,
      method: "chat",
      params: { user_id: "ann", session_id: "cut", resume: true },
    });
    expect(resumed.result).toMatchObject({ response: "You said: Tell me a long story", warnings: [] });
    // Memory came along: a new session of ann's recalls the imported trip.
    await core.request({
      id: 4,
      method: "chat",
      params: { user_id: "ann", input: "Porto in spring again?" },
    });
    // Memory notes go with the user message (docs/agent.md#prompt-reuse), not into the system
    // prompt.
    expect(stack.llamaRequests().at(-1)?.messages.at(-1)?.content).toContain("Porto is lovely");
    expect(existsSync(join(stack.dataDir, "users"))).toBe(false);
    expect(
      existsSync(join(stack.dataDir, "imported-0.1", "users", "ann", "sessions", "trip", "history.json")),
    ).toBe(true);
    core.closeStdin();
    expect(await core.exited()).toBe(0);

    // A second start imports nothing again.
    await using again = spawnCore({ cwd: dir.path, env: stack.env });
    const after = await again.request({
      id: 1,
      method: "sessions.get",
      params: { user_id: "ann", session_id: "trip" },
    });
    expect(after.result.messages).toHaveLength(4);
    again.closeStdin();
    expect(await again.exited()).toBe(0);
  }, 30_000);

  test("users.delete leaves none of the user's text in any file under data_dir, llama-server's log included", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    cpSync(V01, join(stack.dataDir, "users"), { recursive: true });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    for (let i = 0; i < 6; i++) {
      const r = await core.request({
        id: i,
        method: "chat",
        params: { user_id: "ann", input: `MARMOSET note ${i}` },
      });
      expect(r.type).toBe("result");
    }
    await core.request({ id: "b", method: "chat", params: { user_id: "bob", input: "bob's own WOMBAT" } });
    expect(filesHolding(stack.dataDir, "MARMOSET").length).toBeGreaterThan(0);
    // sessions.search runs on a thread of its own (docs/agent.md, The store): the compiled
    // binary starts it, and it finds ann's words for ann only.
    const search = (user_id: string, query: string) =>
      core.request({ id: `q-${user_id}-${query}`, method: "sessions.search", params: { user_id, query } });
    expect((await search("ann", "marmoset")).result.hits.length).toBeGreaterThanOrEqual(6);
    expect((await search("bob", "marmoset")).result.hits).toEqual([]);
    expect(filesHolding(stack.dataDir, "Porto").length).toBeGreaterThan(0);
    // A copy of the database as a reset would have set it aside: the erase reaches it too.
    const aside = join(stack.dataDir, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    for (const suffix of ["", "-wal"])
      if (existsSync(join(stack.dataDir, `local-ai.db${suffix}`)))
        cpSync(join(stack.dataDir, `local-ai.db${suffix}`), `${aside}${suffix}`);
    const del = await core.request({ id: "d", method: "users.delete", params: { user_id: "ann" } });
    expect(del.result.deleted_sessions).toBe(8);
    expect(del.result.set_aside_copies).toEqual([{ path: aside, outcome: "scrubbed", deleted_sessions: 8 }]);
    expect(filesHolding(stack.dataDir, "MARMOSET")).toEqual([]);
    expect(filesHolding(stack.dataDir, "Porto")).toEqual([]);
    expect(filesHolding(stack.dataDir, "WOMBAT").length).toBeGreaterThan(0);
    expect((await search("ann", "marmoset")).result.hits).toEqual([]);
    expect((await search("bob", "wombat")).result.hits.length).toBeGreaterThan(0);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
    expect(filesHolding(stack.dataDir, "MARMOSET")).toEqual([]);
  }, 30_000);

  test("a delete from a second core wins over a turn streaming in the first: nothing of the session comes back", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], knobs: { FAKE_LLAMA_CHUNK_DELAY_MS: "400" } });
    await using a = spawnCore({ cwd: dir.path, env: stack.env });
    await using b = spawnCore({ cwd: dir.path, env: stack.env });
    const first = await a.request(
      { id: "1", method: "chat", params: { session_id: "s", input: "one" } },
      30_000,
    );
    expect(first.type).toBe("result");
    a.send({ id: "2", method: "chat", params: { session_id: "s", input: "two GIBBON" } });
    await a.waitFor((m) => m.some((x) => x.id === "2" && x.event === "llm_chunk"), 30_000);
    const del = await b.request({ id: "d", method: "sessions.delete", params: { session_id: "s" } });
    expect(del.result).toEqual({ deleted: true, set_aside_copies: [] });
    await a.waitFor((m) => a.terminal("2") !== undefined && m.length > 0, 30_000);
    expect(a.terminal("2")).toMatchObject({
      type: "error",
      code: "cancelled",
      data: { reason: "session_deleted" },
    });
    const got = await b.request({ id: "g", method: "sessions.get", params: { session_id: "s" } });
    expect(got).toMatchObject({ type: "error", data: { reason: "session_not_found" } });
    a.closeStdin();
    b.closeStdin();
    expect(await a.exited()).toBe(0);
    expect(await b.exited()).toBe(0);
    expect(filesHolding(stack.dataDir, "GIBBON")).toEqual([]);
  }, 60_000);

  test("two cores on one data folder: chats on one session from both never lose, duplicate or interleave a turn", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], knobs: { FAKE_LLAMA_CHUNK_DELAY_MS: "5" } });
    await using a = spawnCore({ cwd: dir.path, env: stack.env });
    await using b = spawnCore({ cwd: dir.path, env: stack.env });
    // Started together on a new folder, one core may find the other making the database and refuse
    // with `migrating`, to be sent again (docs/agent.md, "Migrations off the loop"): each core's
    // store is opened first, so the chats below race only each other.
    for (const core of [a, b])
      for (let n = 0; ; n++) {
        const listed = await core.request({ id: `l${n}`, method: "sessions.list", params: {} }, 30_000);
        if (listed.type === "result" || listed.data?.problem !== "migrating" || n >= 100) break;
        await Bun.sleep(100);
      }
    const turns = 6;
    const chats: Promise<unknown>[] = [];
    for (let i = 0; i < turns; i++) {
      chats.push(
        a.request(
          { id: `a${i}`, method: "chat", params: { session_id: "shared", input: `from a ${i}` } },
          30_000,
        ),
      );
      chats.push(
        b.request(
          { id: `b${i}`, method: "chat", params: { session_id: "shared", input: `from b ${i}` } },
          30_000,
        ),
      );
    }
    const results = (await Promise.all(chats)) as { type: string }[];
    expect(results.filter((r) => r.type !== "result")).toEqual([]);
    const got = await a.request({ id: "g", method: "sessions.get", params: { session_id: "shared" } });
    const contents: string[] = got.result.messages.map((m: { content: string }) => m.content);
    expect(contents).toHaveLength(turns * 4);
    for (let k = 0; k < contents.length; k += 2) {
      // Each question is followed by its own answer: no turn torn or interleaved.
      expect(contents[k + 1]).toBe(`You said: ${contents[k]}`);
    }
    const questions = contents.filter((_, k) => k % 2 === 0).sort();
    const asked = [...Array(turns).keys()].flatMap((i) => [`from a ${i}`, `from b ${i}`]).sort();
    expect(questions).toEqual(asked);
    // Each core saw the other's turns: the model got the whole history each time.
    const longest = Math.max(...stack.llamaRequests().map((r) => r.messages.length));
    expect(longest).toBe(turns * 4); // system + 2(n-1) history + the question, for the last turn
    a.closeStdin();
    b.closeStdin();
    expect(await a.exited()).toBe(0);
    expect(await b.exited()).toBe(0);
  }, 60_000);

  test("SIGKILL of the core at random instants: every turn whose result was sent is there after", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const answered: string[] = [];
    for (let trial = 0; trial < 5; trial++) {
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const stopAt = Date.now() + 150 + trial * 70;
      // Two turns at least, however slow a loaded machine makes them; then until the instant.
      for (let i = 0; i < 2 || Date.now() < stopAt; i++) {
        const id = `t${trial}-${i}`;
        const r = await core.request({ id, method: "chat", params: { session_id: "k", input: id } }, 20_000);
        if (r.type === "result") answered.push(id);
      }
      // Mid-turn: a chat is sent and the core killed while it runs.
      core.send({ id: "x", method: "chat", params: { session_id: "k", input: `cut ${trial}` } });
      await Bun.sleep(trial * 3);
      core.proc.kill("SIGKILL");
      await core.proc.exited;
    }
    await using check = spawnCore({ cwd: dir.path, env: stack.env });
    const got = await check.request({
      id: "g",
      method: "sessions.get",
      params: { session_id: "k", limit: 1000 },
    });
    const contents = new Set(got.result.messages.map((m: { content: string }) => m.content));
    for (const id of answered) expect(contents.has(id)).toBe(true);
    expect(answered.length).toBeGreaterThan(5);
    check.closeStdin();
    expect(await check.exited()).toBe(0);
  }, 60_000);
});
