import { expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { ChatHarness, type Msg } from "../agent/harness.ts";

async function call(h: ChatHarness, id: string, method: string, params: Record<string, unknown>) {
  h.send(id, method, params);
  return (await h.terminal(id)) as Msg & { result: any; data: any };
}

/** Session `big`: three turns, each a paste of 1.5 Mi times `<i><quote>`. */
function bigSession(h: ChatHarness, quote: string): void {
  for (let i = 0; i < 3; i++)
    h.services.store().conversations.commitTurn({
      userId: "default_user",
      sessionId: "big",
      agent: "plain",
      messages: [
        { role: "user", content: `${i}${quote}`.repeat(1536 * 1024) },
        { role: "assistant", content: `answer ${i}` },
      ],
      at: new Date(),
    });
}

test("an export over 8 MiB is refused inline, and written whole, owner-only, to the path the host names", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  // Three 3 MiB pastes: each a legal input, together more than one answer may carry.
  bigSession(h, '"');
  const inline = await call(h, "i", "sessions.export", { session_id: "big", format: "json" });
  expect(inline).toMatchObject({
    type: "error",
    code: "invalid_request",
    data: { field: "path", reason: "export_too_large" },
  });
  const path = join(h.dataDir, "..", "big.json");
  const written = await call(h, "f", "sessions.export", { session_id: "big", format: "json", path });
  expect(written.result).toEqual({ format: "json", path, bytes: statSync(path).size });
  expect(statSync(path).mode & 0o777).toBe(0o600);
  const parsed = JSON.parse(readFileSync(path, "utf8"));
  expect(parsed.messages.map((m: { seq: number }) => m.seq)).toEqual([0, 1, 2, 3, 4, 5]);
  expect(parsed.messages[4].content).toBe(`2"`.repeat(1536 * 1024));
  const md = await call(h, "m", "sessions.export", { session_id: "big", format: "markdown", path });
  expect(md.result.bytes).toBe(statSync(path).size);
  expect(readFileSync(path, "utf8")).toContain("## Assistant · ");

  const relative = await call(h, "r", "sessions.export", {
    session_id: "big",
    format: "json",
    path: "x.json",
  });
  expect(relative).toMatchObject({ code: "invalid_request", data: { field: "path" } });
  const nowhere = join(h.dataDir, "no", "such", "x.json");
  const missing = await call(h, "n", "sessions.export", { session_id: "big", format: "json", path: nowhere });
  expect(missing).toMatchObject({ code: "invalid_request", data: { field: "path", problem: "ENOENT" } });
  // A path that names a folder has no file name to rename the export to.
  for (const [i, folder] of [`${h.dataDir}/../out/`, `${h.dataDir}/../out/..`].entries()) {
    const r = await call(h, `d${i}`, "sessions.export", { session_id: "big", format: "json", path: folder });
    expect(r).toMatchObject({ code: "invalid_request", data: { field: "path", problem: "EISDIR" } });
  }
  expect(existsSync(join(h.dataDir, "..", "out"))).toBe(false);
});

test("an export is refused a path into app.data_dir: it would replace the database (every user's sessions lost)", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.services.store().conversations.commitTurn({
    userId: "default_user",
    sessionId: "kept",
    agent: "plain",
    messages: [
      { role: "user", content: "hello" },
      { role: "assistant", content: "hi" },
    ],
    at: new Date(),
  });
  const db = readFileSync(join(h.dataDir, "local-ai.db"));
  // Named straight, through a link to the folder, and one folder down.
  const link = join(h.dataDir, "..", "link-to-data");
  symlinkSync(h.dataDir, link);
  mkdirSync(join(h.dataDir, "run"), { recursive: true });
  // `..` after a link is the link target's parent to the OS, not the folder the text names:
  // lexically `a/data`, a harmless folder, but the OS reaches data_dir itself.
  const base = join(h.dataDir, "..");
  mkdirSync(join(base, "inner"));
  mkdirSync(join(base, "a", "data"), { recursive: true });
  symlinkSync(join(base, "inner"), join(base, "a", "link"));
  const paths = [
    join(h.dataDir, "local-ai.db"),
    join(h.dataDir, "local-ai.db-wal"),
    join(link, "local-ai.db"),
    join(h.dataDir, "run", "x.json"),
    `${join(base, "a", "link")}/../data/local-ai.db`,
  ];
  for (const [i, path] of paths.entries()) {
    const r = await call(h, `e${i}`, "sessions.export", { session_id: "kept", format: "json", path });
    expect(r).toMatchObject({
      code: "invalid_request",
      data: { field: "path", reason: "path_unwritable", problem: "EPERM" },
    });
  }
  // The link itself: outside data_dir, but replaced by the file, a data_dir named through it is gone.
  for (const [i, path] of [link, join(base, "a", "link-to-base")].entries()) {
    if (i === 1) symlinkSync(base, path);
    const r = await call(h, `k${i}`, "sessions.export", { session_id: "kept", format: "json", path });
    expect(r).toMatchObject({ code: "invalid_request", data: { field: "path", problem: "EPERM" } });
    expect(lstatSync(path).isSymbolicLink()).toBe(true);
  }
  expect(readFileSync(join(h.dataDir, "local-ai.db")).equals(db)).toBe(true);
  expect(existsSync(join(h.dataDir, "run", "x.json"))).toBe(false);
  const list = await call(h, "l", "sessions.list", {});
  expect(list.result.sessions.map((s: { session_id: string }) => s.session_id)).toEqual(["kept"]);
  // Beside the folder is fine: only the core's own tree is refused.
  const beside = join(h.dataDir, "..", "data-export.json");
  const ok = await call(h, "ok", "sessions.export", { session_id: "kept", format: "json", path: beside });
  expect(ok.result.bytes).toBe(statSync(beside).size);
});

test("an edit committed under an export starts it again: the answer is one conversation, never two tails", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const store = h.services.store();
  const commit = (content: string, replaceFromSeq?: number) =>
    store.conversations.commitTurn({
      userId: "default_user",
      sessionId: "s",
      agent: "plain",
      messages: [
        { role: "user", content },
        { role: "assistant", content: "answer" },
      ],
      at: new Date(),
      ...(replaceFromSeq !== undefined ? { replaceFromSeq } : {}),
    });
  // Over one slice (about 1 MiB of messages), so the export yields between reads.
  for (let i = 0; i < 4; i++) commit(`OLD-${i} ${"x".repeat(600_000)}`);
  // The edit lands after each of the first `edits` attempts has handed out its second piece.
  let attempts = 0;
  let edits = 1;
  const exportPieces = store.exportPieces.bind(store);
  store.exportPieces = (u, s, f) => {
    const pieces = exportPieces(u, s, f);
    if (++attempts > edits) return pieces;
    const next = pieces.next.bind(pieces);
    let given = 0;
    pieces.next = async () => {
      const r = await next();
      // Over a slice itself, so the export it starts again reads twice too.
      if (++given === 2) commit(`NEW-${attempts} ${"x".repeat(1_200_000)}`, 0);
      return r;
    };
    return pieces;
  };
  const once = await call(h, "e", "sessions.export", { session_id: "s", format: "json" });
  expect(attempts).toBe(2);
  const messages = JSON.parse(once.result.content).messages as { seq: number; content: string }[];
  expect(messages.map((m) => m.content.slice(0, 6))).toEqual(["NEW-1 ", "answer"]);

  for (let i = 0; i < 4; i++) commit(`OLD-${i} ${"x".repeat(600_000)}`);
  attempts = 0;
  edits = 3;
  const never = await call(h, "n", "sessions.export", { session_id: "s", format: "json" });
  expect(attempts).toBe(3);
  expect(never).toMatchObject({ type: "error", code: "internal_error", data: { reason: "session_edited" } });
});

test("an export to a long file name: written when the name fits, path_unwritable when it does not", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.services.store().conversations.commitTurn({
    userId: "default_user",
    sessionId: "s",
    agent: "plain",
    messages: [{ role: "user", content: "hello" }],
    at: new Date(),
  });
  // 250 bytes is a name the file system takes; its temp file's name must fit too (255 at most).
  const fits = join(h.dataDir, "..", `${"é".repeat(100)}${"n".repeat(45)}.json`);
  const ok = await call(h, "ok", "sessions.export", { session_id: "s", format: "json", path: fits });
  expect(ok.result).toEqual({ format: "json", path: fits, bytes: statSync(fits).size });
  expect(JSON.parse(readFileSync(fits, "utf8")).messages[0].content).toBe("hello");
  const tooLong = join(h.dataDir, "..", `${"n".repeat(300)}.json`);
  const refused = await call(h, "no", "sessions.export", { session_id: "s", format: "json", path: tooLong });
  expect(refused).toMatchObject({
    code: "invalid_request",
    data: { field: "path", reason: "path_unwritable", problem: "ENAMETOOLONG" },
  });
});

test("a shutdown ends an export under way, cancelled, and leaves no file; cancel cannot reach it", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  // Slices of 1 MiB with the loop free between them: a session of hundreds of MiB, or a slow
  // disk, held the core's stop past the host's wait (stop grace + 5 s), which then killed it.
  bigSession(h, "");
  const path = join(h.dataDir, "..", "big.json");
  h.send("f", "sessions.export", { session_id: "big", format: "json", path });
  h.send("c", "cancel", { request_id: "f" });
  expect(await h.terminal("c")).toMatchObject({ result: { cancelled: false } });
  // Its grace (STOP_GRACE_MS) over: the export is still under way.
  await h.stopRequests(0);
  expect(await h.terminal("f")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
  expect(existsSync(path)).toBe(false);
  // Nor its temp file beside it.
  expect(readdirSync(join(h.dataDir, "..")).filter((n) => n.includes("big.json"))).toEqual([]);
});

test("an export sent just before the stop ends within the stop's grace: its file written, as a script expects", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.send("t", "chat", { input: "keep this", session_id: "small", agent: "plain" });
  await h.terminal("t");
  const path = join(h.dataDir, "..", "small.json");
  h.send("f", "sessions.export", { session_id: "small", format: "json", path });
  await h.stopRequests();
  expect(await h.terminal("f")).toMatchObject({ type: "result" });
  expect(readFileSync(path, "utf8")).toContain("keep this");
});
