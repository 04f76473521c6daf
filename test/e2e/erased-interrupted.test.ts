import { describe, expect, test } from "bun:test";
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../src/store/store.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { coreTemp, forms, markersIn } from "../fixtures/erased-forms.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { holdOpen } from "../fixtures/held-file.ts";
import { b64, png } from "../fixtures/images.ts";
import { commitNotedTurn } from "../fixtures/noted-turn.ts";
import { readDb } from "../fixtures/read-db.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// The erase promise (docs/agent.md, The store, "Privacy") where test/e2e/erased-everywhere.test.ts
// does not go: a turn cut short (llama-server dead mid-stream, the core SIGKILLed mid-stream)
// whose checkpoint, partial reply and long input kept apart (`checkpoint_inputs`) hold the words;
// a database set aside as damaged (`local-ai.db.corrupt-<time>`) holding the user's rows.
const onPosix = process.platform !== "win32";

/**
 * Over store/checkpoint.ts INPUT_APART_CHARS (kept apart from the checkpoint's body) in few of
 * the stand-in's tokens (one a word): it fits the slot.
 */
const longInput = (marker: string) =>
  `my zebra code is ${marker} ${`${"abcdefghij".repeat(10)} `.repeat(700)}`;

describe.skipIf(!onPosix)("an erase of turns cut short, through the compiled binary", () => {
  test("a checkpoint, its partial reply and its long input kept apart leave no word behind", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: "noted QZCUTPART7 and then some more words", chunk_delay_ms: 50, hang: true }],
      // llama-server's log rotated at each start: the earlier files are searched too.
      llama: ["log_max_bytes: 1000"],
    });
    const { where, env } = coreTemp(dir.path, stack.dataDir, { ...stack.env, LOCAL_AI_LOG_LEVEL: "debug" });

    const first = spawnCore({ cwd: dir.path, env });
    // llama-server dies mid-stream: the turn's checkpoint keeps what streamed. Killed once the
    // core has passed the word on: a crash of its own could reset the connection before the core
    // read the word, and on a busy box nothing streamed was kept.
    first.send({
      id: 1,
      method: "chat",
      params: { user_id: "qzuserid7@example.com", session_id: "QZSESSONE7", input: longInput("QZCUTLONG7") },
    });
    const streamed = (m: { id?: unknown; event?: unknown }) =>
      m.id === 1 && m.event === "llm_chunk" && JSON.stringify(m).includes("QZCUTPART7");
    await first.waitFor((ms) => ms.some(streamed), 30_000);
    for (const pid of stack.recordedServers()) process.kill(pid, "SIGKILL");
    await first.waitFor(() => first.terminal(1) !== undefined, 30_000);
    expect(first.terminal(1)).toMatchObject({ type: "error" });
    // The restarted stand-in reads its script from the start.
    const slow = { content: "QZKILLPART7 words keep coming here slowly", chunk_delay_ms: 50, hang: true };
    writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, JSON.stringify([slow]));
    // The core killed mid-stream: the turn's checkpoint is all that is left of it.
    first.send({
      id: 2,
      method: "chat",
      params: { user_id: "qzuserid7@example.com", session_id: "QZSESSTWO7", input: longInput("QZKILLLONG7") },
    });
    await first.waitFor((ms) => ms.some((m) => m.id === 2 && m.event === "llm_chunk"), 30_000);
    first.proc.kill("SIGKILL");
    await first.proc.exited;
    const S1 = ["QZCUTLONG7", "QZCUTPART7", "QZSESSONE7"];
    const S2 = ["QZKILLLONG7", "QZKILLPART7", "QZSESSTWO7", "qzuserid7@example.com"];
    // Before: each is on disk, so the probe can fail (the killed turn's streamed words are not:
    // a partial reply is kept when its request fails, not when the core dies).
    expect([...S1, "QZKILLLONG7"].filter((m) => markersIn(where, [m]).length === 0)).toEqual([]);
    {
      using db = readDb(join(stack.dataDir, "local-ai.db"));
      const apart = db.query("SELECT session_id FROM checkpoint_inputs ORDER BY session_id").all();
      expect(apart).toEqual([{ session_id: "QZSESSONE7" }, { session_id: "QZSESSTWO7" }]);
    }

    writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, "[]");
    await using core = spawnCore({ cwd: dir.path, env });
    const ask = async (id: number, method: string, params: Record<string, unknown>) => {
      const r = await core.request(
        { id, method, params: { user_id: "qzuserid7@example.com", ...params } },
        30_000,
      );
      expect(r).toMatchObject({ type: "result" });
      return r.result;
    };
    await ask(3, "sessions.delete", { session_id: "QZSESSONE7" });
    expect(markersIn(where, S1)).toEqual([]);
    await ask(4, "users.delete", {});
    expect(markersIn(where, [...S1, ...S2])).toEqual([]);
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    expect(markersIn(where, [...S1, ...S2])).toEqual([]);
    expect(readdirSync(join(stack.dataDir, "logs"))).toContain("llama-server.log.1");
    // Nor in what either core printed at `debug` (the killed one's turn, the crash's restart).
    const printed = Buffer.from(first.stderr + core.stderr);
    expect([...S1, ...S2].filter((m) => forms(m).some((f) => printed.includes(f)))).toEqual([]);
  }, 60_000);

  // Garbage over its header: not a database, removed whole; a damage noted by a statement
  // (store/db/open.ts markDamaged): it opens and passes its check, and is scrubbed in place.
  const damages = [
    ["header", false],
    ["header", true],
    ["noted", false],
    ["noted", true],
  ] as const;
  for (const [damage, killed] of damages)
    test(`a database set aside as damaged (${damage}, ${killed ? "its log left by a SIGKILL" : "shut down"}): users.delete leaves none of the user's words in it`, async () => {
      await using dir = tmpdir();
      const stack = writeStack(dir.path, { tools: [], script: [{ content: "Noted QZASIDEREPLY7." }] });
      const { where, env } = coreTemp(dir.path, stack.dataDir, stack.env);
      const first = spawnCore({ cwd: dir.path, env });
      const said = await first.request(
        {
          id: 1,
          method: "chat",
          params: {
            user_id: "qzasideuser7@example.com",
            session_id: "QZASIDESESS7",
            input: "my code is QZASIDE7",
          },
        },
        30_000,
      );
      expect(said).toMatchObject({ type: "result" });
      if (killed) first.proc.kill("SIGKILL");
      else first.closeStdin();
      await first.proc.exited;
      const db = join(stack.dataDir, "local-ai.db");
      if (damage === "noted") writeFileSync(`${db}.damaged`, "database disk image is malformed\n");
      else {
        const fd = openSync(db, "r+");
        writeSync(fd, Buffer.alloc(100, 0x5a), 0, 100, 0);
        closeSync(fd);
      }

      writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, JSON.stringify([{ content: "Hello." }]));
      await using core = spawnCore({ cwd: dir.path, env });
      const fresh = await core.request(
        { id: 2, method: "chat", params: { user_id: "bob", session_id: "b1", input: "hi" } },
        30_000,
      );
      expect(JSON.stringify(fresh.result.warnings)).toContain("store_reset");
      expect(readdirSync(stack.dataDir).some((n) => n.startsWith("local-ai.db.corrupt-"))).toBe(true);
      const words = ["QZASIDE7", "QZASIDEREPLY7", "QZASIDESESS7", "qzasideuser7@example.com"];
      for (const m of words) expect(markersIn(where, [m]).length).toBeGreaterThan(0);
      // The copy and its log held open: what their blocks keep once the erase removed them.
      const held = readdirSync(stack.dataDir)
        .filter((n) => n.startsWith("local-ai.db.corrupt-"))
        .map((n) => holdOpen(join(stack.dataDir, n)));
      const kept = () => held.filter((h) => words.some((m) => forms(m).some((f) => h.read().includes(f))));
      expect(kept().length).toBeGreaterThan(0);
      const gone = await core.request(
        { id: 3, method: "users.delete", params: { user_id: "qzasideuser7@example.com" } },
        30_000,
      );
      const outcome = damage === "noted" ? "scrubbed" : "removed";
      expect(gone.result.set_aside_copies).toMatchObject([{ outcome }]);
      expect(markersIn(where, words)).toEqual([]);
      expect(kept()).toEqual([]);
      for (const h of held) h[Symbol.dispose]();
      await core.request({ id: "stop", method: "shutdown" });
      expect(await core.exited(10_000)).toBe(0);
      expect(markersIn(where, words)).toEqual([]);
    }, 60_000);
});

describe.skipIf(!onPosix)("an erase while a document is added, through the compiled binary", () => {
  test("no chunk of a session's or the library's document is written after, or left by, the erase", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: "Noted." }],
      extraYaml: [
        "  embedding_model: embed",
        "models:",
        "  - {name: embed, path: ./embed.gguf, kind: embedding}",
      ].join("\n"),
    });
    const { where, env } = coreTemp(dir.path, stack.dataDir, stack.env);
    // Every paragraph holds the word: any chunk written, early or late, holds it.
    const book = (marker: string) =>
      Array.from({ length: 3000 }, (_, i) => `Paragraph ${i} of ${marker} ${"dolor sit ".repeat(60)}`).join(
        "\n\n",
      );
    const attached = join(dir.path, "QZADDNAME7.txt");
    writeFileSync(attached, book("QZADDSESSION7"));
    const library = join(dir.path, "library.txt");
    writeFileSync(library, book("QZADDLIBRARY7"));
    await using core = spawnCore({ cwd: dir.path, env });
    const said = await core.request(
      {
        id: 1,
        method: "chat",
        params: { user_id: "qzdocuser7@example.com", session_id: "QZDOCSESS7", input: "hello" },
      },
      30_000,
    );
    expect(said).toMatchObject({ type: "result" });
    core.send({
      id: "a1",
      method: "documents.add",
      params: { user_id: "qzdocuser7@example.com", path: attached, session_id: "QZDOCSESS7" },
    });
    core.send({
      id: "a2",
      method: "documents.add",
      params: { user_id: "qzdocuser7@example.com", path: library },
    });
    for (const id of ["a1", "a2"])
      await core.waitFor((m) => m.some((x) => x.id === id && x.event === "index_progress"), 30_000);
    // Their first batches are on disk: the probe can fail.
    for (const m of ["QZADDSESSION7", "QZADDLIBRARY7"])
      expect(markersIn(where, [m]).length).toBeGreaterThan(0);
    const s = await core.request(
      {
        id: 2,
        method: "sessions.delete",
        params: { user_id: "qzdocuser7@example.com", session_id: "QZDOCSESS7" },
      },
      30_000,
    );
    expect(s).toMatchObject({ type: "result" });
    await core.waitFor(() => core.terminal("a1") !== undefined, 30_000);
    // Cut by the erase (here, each time: 3,000 paragraphs take far longer than the delete); on a
    // box slow enough that the add committed first, the erase took it whole, as the probe checks.
    const a1 = core.terminal("a1");
    if (a1?.type === "error") expect(a1).toMatchObject({ data: { reason: "session_deleted" } });
    expect(markersIn(where, ["QZADDSESSION7", "QZADDNAME7", "QZDOCSESS7"])).toEqual([]);
    const u = await core.request(
      { id: 3, method: "users.delete", params: { user_id: "qzdocuser7@example.com" } },
      30_000,
    );
    expect(u).toMatchObject({ type: "result" });
    await core.waitFor(() => core.terminal("a2") !== undefined, 30_000);
    expect(
      markersIn(where, ["QZADDSESSION7", "QZADDLIBRARY7", "QZADDNAME7", "qzdocuser7@example.com"]),
    ).toEqual([]);
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    expect(
      markersIn(where, ["QZADDSESSION7", "QZADDLIBRARY7", "QZADDNAME7", "qzdocuser7@example.com"]),
    ).toEqual([]);
  }, 60_000);
});

describe.skipIf(!onPosix)("an export cut short, through the compiled binary", () => {
  test("a killed core's temp file is zeroed at the next start; the session's erase leaves no word", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const store = Store.open(stack.dataDir, { chunkThread: false });
    // 24 MB in few of FTS5's tokens: quick to write, and an export of it lasts far longer than
    // the test's look at its temp file and the kill after it.
    for (let i = 0; i < 24; i++)
      commitNotedTurn(store, "ann", "s1", `QZEXPORT7 ${"y".repeat(1_000_000)} ${i}`);
    store.close();
    const out = join(dir.path, "out");
    mkdirSync(out);
    const { tmp, env } = coreTemp(dir.path, stack.dataDir, stack.env);
    const temps = () => readdirSync(out).filter((f) => f.endsWith(".tmp"));
    const holding = (h: { read: () => Buffer }) => forms("QZEXPORT7").some((f) => h.read().includes(f));
    /** The export's temp file held open once it holds the words. */
    const exportHeld = async (core: ReturnType<typeof spawnCore>) => {
      core.send({
        id: "e",
        method: "sessions.export",
        params: { user_id: "ann", session_id: "s1", format: "json", path: join(out, "s1.json") },
      });
      expect(await waitFor(() => temps().length > 0, { timeoutMs: 20_000, intervalMs: 1 })).toBe(true);
      const held = holdOpen(join(out, temps()[0] as string));
      await waitFor(() => holding(held), { timeoutMs: 20_000, intervalMs: 1 });
      return held;
    };

    const killed = spawnCore({ cwd: dir.path, env });
    using first = await exportHeld(killed);
    killed.proc.kill("SIGKILL");
    await killed.proc.exited;
    expect(temps()).toHaveLength(1);
    expect(holding(first)).toBe(true);
    await using core = spawnCore({ cwd: dir.path, env });
    expect(await waitFor(() => temps().length === 0, { timeoutMs: 5000, intervalMs: 20 })).toBe(true);
    expect(holding(first)).toBe(false);

    const gone = await core.request(
      { id: 1, method: "sessions.delete", params: { user_id: "ann", session_id: "s1" } },
      30_000,
    );
    expect(gone).toMatchObject({ type: "result" });
    expect(markersIn([stack.dataDir, tmp, out], ["QZEXPORT7"])).toEqual([]);
  }, 60_000);
});

describe.skipIf(!onPosix)("an erase of a session while its turn streams, through the compiled binary", () => {
  // Its first run, or its resume (`resume: true`) after a core killed in that first run.
  const cases = [
    ["sessions.delete", false],
    ["users.delete", false],
    ["sessions.delete", true],
  ] as const;
  for (const [method, resumed] of cases)
    test(`its checkpoint, long input, partial reply and staged image are not written back after ${method}${resumed ? ", the turn resumed" : ""}`, async () => {
      await using dir = tmpdir();
      const stack = writeStack(dir.path, {
        tools: [],
        script: [{ content: "QZFLIGHTPART7 words keep coming here slowly", chunk_delay_ms: 50, hang: true }],
      });
      const projector = join(dir.path, "mmproj.gguf");
      writeFileSync(projector, "");
      const config = join(dir.path, "config.yaml");
      writeFileSync(
        config,
        readFileSync(config, "utf8").replace(
          "  stop_grace_s: 1",
          `  stop_grace_s: 1\n  extra_args: ["--mmproj", ${JSON.stringify(projector)}]`,
        ),
      );
      const { where, env } = coreTemp(dir.path, stack.dataDir, stack.env);
      const PIXELS = "QZFLIGHTPIXELS";
      // Over 2 MB: its bytes kept in three parts of about 1 MB (docs/protocol.md#images), the
      // word in each.
      const image = Buffer.concat([png(4, 4), Buffer.from(PIXELS.repeat(160_000))]);
      const streaming = async (resume: boolean) => {
        const c = spawnCore({ cwd: dir.path, env });
        c.send({
          id: "c",
          method: "chat",
          params: {
            user_id: "qzflightuser7@example.com",
            session_id: "QZFLIGHTSESS7",
            ...(resume
              ? { resume: true }
              : { input: longInput("QZFLIGHTLONG7"), images: [{ data: b64(image) }] }),
          },
        });
        await c.waitFor((ms) => ms.some((m) => m.id === "c" && m.event === "llm_chunk"), 30_000);
        return c;
      };
      if (resumed) {
        const killed = await streaming(false);
        killed.proc.kill("SIGKILL");
        await killed.proc.exited;
      }
      await using core = await streaming(resumed);
      const words = ["QZFLIGHTLONG7", PIXELS];
      expect(words.filter((m) => markersIn(where, [m]).length === 0)).toEqual([]);
      {
        using db = readDb(join(stack.dataDir, "local-ai.db"));
        const parts = db.query("SELECT count(*) AS n FROM attachment_data").get() as { n: number };
        expect(parts.n).toBeGreaterThanOrEqual(3);
      }
      const gone = await core.request(
        {
          id: 1,
          method,
          params: {
            user_id: "qzflightuser7@example.com",
            ...(method === "users.delete" ? {} : { session_id: "QZFLIGHTSESS7" }),
          },
        },
        30_000,
      );
      expect(gone).toMatchObject({ type: "result" });
      await core.waitFor(() => core.terminal("c") !== undefined, 30_000);
      expect(core.terminal("c")).toMatchObject({ type: "error" });
      const all = [...words, "QZFLIGHTPART7", "QZFLIGHTSESS7"];
      if (method === "users.delete") all.push("qzflightuser7@example.com");
      expect(markersIn(where, all)).toEqual([]);
      await core.request({ id: "stop", method: "shutdown" });
      expect(await core.exited(10_000)).toBe(0);
      expect(markersIn(where, all)).toEqual([]);
    }, 60_000);
});

describe.skipIf(!onPosix)("an erase of a 0.1 interrupted turn, through the compiled binary", () => {
  test("its imported checkpoint, partial reply and the 0.1 files kept aside leave no word behind", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const session = join(stack.dataDir, "users", "ann", "sessions", "cut");
    mkdirSync(session, { recursive: true });
    const input = longInput("QZOLDCUT7");
    const checkpoint = {
      version: 1,
      trace_id: "4409555f60568507",
      user_input: input,
      agent: "assistant",
      step: 0,
      parse_errors: 0,
      best_text: "",
      turn: [{ role: "user", content: input }],
      partial: { step: 0, reasoning: "", content: "QZOLDPART7 so far" },
      updated_at: "2026-12-01T21:29:19.325Z",
    };
    writeFileSync(join(session, "checkpoint.json"), JSON.stringify(checkpoint));
    const { where, env } = coreTemp(dir.path, stack.dataDir, stack.env);
    await using core = spawnCore({ cwd: dir.path, env });
    const listed = await core.request({ id: 1, method: "sessions.list", params: { user_id: "ann" } }, 30_000);
    expect(listed.result.sessions.map((s: { session_id: string }) => s.session_id)).toContain("cut");
    const words = ["QZOLDCUT7", "QZOLDPART7"];
    expect(words.filter((m) => markersIn(where, [m]).length === 0)).toEqual([]);
    {
      using db = readDb(join(stack.dataDir, "local-ai.db"));
      expect(db.query("SELECT session_id FROM checkpoints").all()).toEqual([{ session_id: "cut" }]);
    }
    const gone = await core.request(
      { id: 2, method: "sessions.delete", params: { user_id: "ann", session_id: "cut" } },
      30_000,
    );
    expect(gone).toMatchObject({ type: "result" });
    expect(markersIn(where, words)).toEqual([]);
    await core.request({ id: "stop", method: "shutdown" });
    expect(await core.exited(10_000)).toBe(0);
    expect(markersIn(where, words)).toEqual([]);
  }, 60_000);
});
