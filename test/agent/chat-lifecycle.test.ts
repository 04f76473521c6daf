import { describe, expect, spyOn, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { logger } from "../../src/util/logger.ts";
import { waitFor } from "../fixtures/wait.ts";
import { ChatHarness, names } from "./harness.ts";

const calls = (h: ChatHarness) =>
  existsSync(h.mcpLog)
    ? readFileSync(h.mcpLog, "utf8")
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { tool: string; args: Record<string, unknown> })
    : [];

describe("chat: cancel", () => {
  test("cancel during streaming closes the stream and ends with cancelled after loop_abort", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["a", "b"], hang: true });
    h.send("c1", "chat", { input: "long", session_id: "cx" });
    // "b" may come on its own or joined to "a" (docs/protocol.md#joined-pieces).
    await h.waitFor((m) => m.event === "llm_chunk" && String(m.delta).endsWith("b"));
    h.send("k1", "cancel", {});
    expect((await h.terminal("k1")).result).toEqual({ cancelled: true });
    const end = await h.terminal("c1");
    expect(end).toMatchObject({ type: "error", code: "cancelled" });
    expect(h.events("c1").at(-1)).toMatchObject({ event: "loop_abort", reason: "cancelled", step: 0 });
    expect(await waitFor(() => h.llama.disconnects === 1)).toBe(true);
    // The interrupted turn stays resumable.
    expect(h.checkpoint("cx") !== undefined).toBe(true);
    h.send("k2", "cancel", { request_id: "c1" });
    expect((await h.terminal("k2")).result).toEqual({ cancelled: false });
  });

  test("cancel during a tool stops waiting for it; resume re-runs only the unfinished call", async () => {
    await using h = new ChatHarness();
    h.llama.script({
      tool_calls: [
        { name: "t__echo", arguments: { text: "first" } },
        { name: "t__slow", arguments: { ms: 6000 } },
      ],
    });
    h.send("c1", "chat", { input: "work", session_id: "rs" });
    await h.waitFor((m) => m.event === "tool_start" && m.tool === "t.slow");
    // Cancel once the server is really running it, so the test proves the stop reaches the tool.
    expect(await waitFor(() => calls(h).some((c) => c.tool === "slow"))).toBe(true);
    const cancelledAt = Date.now();
    h.send("k", "cancel", { request_id: "c1" });
    expect(await h.terminal("c1")).toMatchObject({ type: "error", code: "cancelled" });
    // Well before the 6 s the tool would take.
    expect(Date.now() - cancelledAt).toBeLessThan(4000);
    // The running call ends with its tool_done (a host's spinner per tool_start gets its end), then loop_abort.
    const tools = h.events("c1").filter((e) => String(e.event).startsWith("tool_"));
    expect(tools.map((e) => `${e.event} ${e.tool}`)).toEqual([
      "tool_start t.echo",
      "tool_done t.echo",
      "tool_start t.slow",
      "tool_done t.slow",
    ]);
    const tail = h.events("c1").slice(-3);
    expect(tail.map((e) => e.event)).toEqual(["tool_start", "tool_done", "loop_abort"]);
    expect(tail[1]).toMatchObject({ step: 0, tool: "t.slow", status: "error", retryable: false });
    expect(String(tail[1]?.preview)).toContain("cancelled");
    expect(typeof tail[1]?.ms).toBe("number");
    expect(tail[2]).toMatchObject({ event: "loop_abort", reason: "cancelled", step: 0 });
    // The MCP server was told to stop the slow call.
    expect(await waitFor(() => calls(h).some((c) => c.tool === "slow_cancelled"))).toBe(true);

    h.llama.script({ content: ["resumed fine"] });
    const { terminal, events } = await h.chat("c2", { session_id: "rs", resume: true });
    expect(terminal.result).toMatchObject({ response: "resumed fine", warnings: [] });
    expect(events.filter((e) => e.event === "tool_start").map((e) => e.tool)).toEqual(["t.slow"]);
    expect(events[0]).toMatchObject({ event: "run_start", user_input: "work" });
    expect(calls(h).filter((c) => c.tool === "echo")).toHaveLength(1);
    expect(h.checkpoint("rs") !== undefined).toBe(false);
    const history = h.history("rs");
    expect(history.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
    ]);
  }, 30_000);

  test("a session deleted during a tool call: its tool_done says the delete stopped it, not a cancel", async () => {
    await using h = new ChatHarness();
    h.llama.script({ tool_calls: [{ name: "t__slow", arguments: { ms: 6000 } }] });
    h.send("c1", "chat", { input: "work", session_id: "del" });
    await h.waitFor((m) => m.event === "tool_start" && m.tool === "t.slow");
    h.send("d", "sessions.delete", { session_id: "del" });
    expect(await h.terminal("c1")).toMatchObject({ code: "cancelled", data: { reason: "session_deleted" } });
    const tail = h.events("c1").slice(-2);
    expect(tail.map((e) => e.event)).toEqual(["tool_done", "loop_abort"]);
    expect(tail[0]).toMatchObject({ tool: "t.slow", status: "error", retryable: false });
    expect(String(tail[0]?.preview)).toBe(
      "cancelled: session 'del' was deleted while this turn ran; nothing of the turn was kept",
    );
  });

  test("two parallel chats: cancelling one leaves the other untouched", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] }, { slots: 2 });
    const tokens = Array.from({ length: 40 }, (_, i) => `t${i} `);
    h.llama.script({ content: tokens, chunk_delay_ms: 20 }, { content: tokens, chunk_delay_ms: 20 });
    h.send("a", "chat", { input: "one", session_id: "pa" });
    h.send("b", "chat", { input: "two", session_id: "pb" });
    await h.waitFor((m) => m.id === "a" && m.event === "llm_chunk");
    await h.waitFor((m) => m.id === "b" && m.event === "llm_chunk");
    h.send("k", "cancel", {});
    expect(await h.terminal("k")).toMatchObject({ type: "error", code: "invalid_request" });
    h.send("k2", "cancel", { request_id: "a" });
    expect((await h.terminal("k2")).result).toEqual({ cancelled: true });
    expect(await h.terminal("a")).toMatchObject({ code: "cancelled" });
    const b = await h.terminal("b");
    expect(b.result).toMatchObject({ response: tokens.join("") });
    expect(h.provider.maxActive).toBe(2);
  });

  test("chats beyond the slots wait; two chats on one session run one after the other", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] }, { slots: 1 });
    h.llama.script({ content: ["x", "y"], chunk_delay_ms: 30 }, { content: ["z"] }, { content: ["w"] });
    h.send(1, "chat", { input: "first", session_id: "same" });
    h.send(2, "chat", { input: "second", session_id: "same" });
    h.send(3, "chat", { input: "other", session_id: "other" });
    for (const id of [1, 2, 3]) expect((await h.terminal(id)).type).toBe("result");
    expect(h.provider.maxActive).toBe(1);
    const secondReq = h.llama.requests.find((r) => r.body.messages.at(-1)?.content === "second");
    expect(secondReq?.body.messages.map((m) => m.content)).toContain("first");
  });
});

describe("chat: failures and disk", () => {
  test("llama-server dying mid-stream is an error, and the next chat works", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["par", "tial"], crash_after_chunks: 3 }, { content: ["recovered"] });
    const broken = await h.chat(1, { input: "x", session_id: "d" });
    expect(broken.terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "connection_lost" },
    });
    expect(broken.events.at(-1)).toMatchObject({ event: "loop_abort", reason: "llm_error" });
    expect(h.provider.failures).toHaveLength(1);
    expect(h.provider.active).toBe(0);
    const next = await h.chat(2, { input: "again", session_id: "d2" });
    expect(next.terminal.result).toMatchObject({ response: "recovered" });
  });

  test("a wedged server (stream open, no bytes) is reported and the chat ends with a named error", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] }, { requestTimeoutMs: 300 });
    h.llama.script({ content: ["stuck"], hang: true }, { content: ["fine"] });
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "w" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { reason: "server_failed" },
    });
    expect(terminal.message).toContain("stopped responding");
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "llm_error" });
    expect(h.provider.failures[0]).toContain("no progress");
    await waitFor(() => h.llama.disconnects > 0, { timeoutMs: 1000 });
    expect(h.llama.disconnects).toBe(1); // the hung stream was closed
    const next = await h.chat(2, { input: "again", session_id: "w2" });
    expect(next.terminal).toMatchObject({ result: { response: "fine" } });
  });

  test("the server dying under an open stream ends the chat at once with the crash named", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["stuck"], hang: true });
    const pending = h.chat(1, { input: "x", session_id: "dd" });
    await h.waitFor((m) => m.id === 1 && m.event === "llm_chunk"); // the stream is open
    h.provider.died.abort(new CoreError("internal_error", "llama-server crashed (killed by SIGKILL)"));
    const { terminal } = await pending;
    expect(terminal).toMatchObject({ code: "internal_error", data: { reason: "server_failed" } });
    expect(terminal.message).toContain("crashed");
  });

  test("the context filling up mid-reply ends with a result and a context_full warning (docs/protocol.md#chat)", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["so", " much", " to", " say"], finish_reason: "length" });
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "ov" });
    expect(terminal).toMatchObject({
      type: "result",
      result: { response: "so much to say", warnings: [{ code: "context_full" }] },
    });
    expect(events.at(-1)).toMatchObject({ event: "final", response: "so much to say" });
  });

  test("a reply cut by the configured reply limit is a result with a reply_truncated warning", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 4 }] });
    h.llama.script({ content: ["so", " much", " to", " say"], finish_reason: "length" });
    const { terminal } = await h.chat(1, { input: "x", session_id: "cap" });
    expect(terminal).toMatchObject({
      type: "result",
      result: { response: "so much to say", warnings: [{ code: "reply_truncated" }] },
    });
    expect(h.llama.requests[0]?.body.max_tokens).toBe(4);
  });

  test("a 5xx becomes internal_error with the server's message", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ error: { status: 503, message: "Loading model" } });
    const { terminal } = await h.chat(1, { input: "x" });
    expect(terminal).toMatchObject({ type: "error", code: "internal_error" });
    expect(terminal.message).toContain("Loading model");
  });

  test("resume from a checkpoint left by a killed core skips the completed tool call", async () => {
    await using h = new ChatHarness();
    h.writeCheckpoint("k9", {
      version: 1,
      trace_id: "0000000000000000",
      user_input: "do two things",
      agent: "assistant",
      step: 1,
      parse_errors: 0,
      best_text: "",
      turn: [
        { role: "user", content: "do two things" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "t__echo", arguments: '{"text":"one"}' } },
            { id: "c2", type: "function", function: { name: "t__echo", arguments: '{"text":"two"}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "echo: one" },
      ],
      updated_at: "2026-01-01T00:00:00.000Z",
    });
    h.llama.script({ content: ["both done"] });
    const { terminal, events } = await h.chat("r", { session_id: "k9", resume: true });
    expect(terminal.result).toMatchObject({ response: "both done" });
    expect(events.filter((e) => e.event === "tool_start")).toEqual([
      expect.objectContaining({ step: 0, args: { text: "two" } }),
    ]);
    expect(calls(h).map((c) => c.args.text)).toEqual(["two"]);
    const sent = h.llama.requests[0]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(sent).toEqual(["echo: one", "echo: two"]);
    expect(events.find((e) => e.event === "llm_start")).toMatchObject({ step: 1 });
  });

  test("resume with nothing interrupted: no input is nothing_to_resume and writes nothing; an input runs, warned", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["done"] }, { content: ["new turn"] });
    await h.chat("a", { input: "a finished turn", session_id: "fin" });
    // The host saw no result (a crash) and asks to resume: the turn had finished.
    const again = await h.chat("r", { session_id: "fin", resume: true });
    expect(again.terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "resume", reason: "nothing_to_resume" },
    });
    expect(h.history("fin").map((m) => m.content)).toEqual(["a finished turn", "done"]);
    const never = await h.chat("n", { session_id: "never", resume: true });
    expect(never.terminal).toMatchObject({ type: "error", data: { reason: "nothing_to_resume" } });
    expect(h.history("never")).toEqual([]);
    expect(h.llama.requests).toHaveLength(1);
    const withInput = await h.chat("i", { session_id: "fin", resume: true, input: "more" });
    expect(
      (withInput.terminal.result as { warnings: { code: string }[] }).warnings.map((w) => w.code),
    ).toEqual(["nothing_to_resume"]);
    expect(h.history("fin")).toHaveLength(4);
  });

  test("a corrupt database is moved aside, a fresh one used, and the chat says store_reset", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    mkdirSync(h.dataDir, { recursive: true });
    writeFileSync(join(h.dataDir, "local-ai.db"), "{ this is not a database \u0000".repeat(200));
    h.llama.script({ content: ["fresh"] }, { content: ["again"] });
    const { terminal } = await h.chat(1, { input: "hello", session_id: "bad" });
    const result = terminal.result as { warnings: { code: string; message: string }[] };
    expect(result.warnings.map((w) => w.code)).toEqual(["store_reset"]);
    expect(result.warnings[0]?.message).toContain("local-ai.db.corrupt-");
    const aside = readdirSync(h.dataDir).filter((f) => f.startsWith("local-ai.db.corrupt-"));
    expect(aside).toHaveLength(1);
    expect(readFileSync(join(h.dataDir, aside[0] as string), "utf8")).toContain("this is not a database");
    expect(h.history("bad")).toHaveLength(2);
    // Said once, not on every chat after.
    const next = await h.chat(2, { input: "more", session_id: "bad" });
    expect((next.terminal.result as { warnings: unknown[] }).warnings).toEqual([]);
  });

  test("a chat refused before its turn begins (nothing to resume) leaves store_reset to the next chat", async () => {
    // A host back from a crash resumes first; the database was reset, so nothing is there to
    // resume. The refusal carries no warnings: the reset, taken by it, was never told at all.
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    mkdirSync(h.dataDir, { recursive: true });
    writeFileSync(join(h.dataDir, "local-ai.db"), "{ this is not a database \u0000".repeat(200));
    h.llama.script({ content: ["fresh"] });
    const resumed = await h.chat("r", { session_id: "bad", resume: true });
    expect(resumed.terminal).toMatchObject({ type: "error", data: { reason: "nothing_to_resume" } });
    const { terminal } = await h.chat("n", { input: "hello", session_id: "bad" });
    const result = terminal.result as { warnings: { code: string }[] };
    expect(result.warnings.map((w) => w.code)).toEqual(["store_reset"]);
  });

  test("a chat that fails once its turn has begun (llama-server's 5xx) leaves store_reset to the next", async () => {
    // An error carries no warnings: taken as the turn began, the reset went with the failure and
    // the host was never told its conversations had been moved aside.
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    mkdirSync(h.dataDir, { recursive: true });
    writeFileSync(join(h.dataDir, "local-ai.db"), "{ this is not a database \u0000".repeat(200));
    h.llama.script({ error: { status: 503, message: "Loading model" } }, { content: ["fresh"] });
    const failed = await h.chat("f", { input: "hello", session_id: "bad" });
    expect(failed.terminal).toMatchObject({ type: "error", code: "internal_error" });
    const { terminal } = await h.chat("n", { input: "hello", session_id: "bad" });
    const result = terminal.result as { warnings: { code: string }[] };
    // The failed turn's checkpoint is set aside by this one: said too, after the reset.
    expect(result.warnings.map((w) => w.code)).toEqual(["store_reset", "checkpoint_discarded"]);
  });

  test("ids that could escape the data directory are invalid_request naming the field", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const cases: [Record<string, unknown>, string][] = [
      [{ user_id: "../../etc" }, "user_id"],
      [{ session_id: "a/b" }, "session_id"],
      [{ session_id: ".hidden" }, "session_id"],
      [{ user_id: "CON" }, "user_id"],
      [{ session_id: "x".repeat(129) }, "session_id"],
    ];
    for (const [i, [params, field]] of cases.entries()) {
      const { terminal } = await h.chat(`p${i}`, { input: "x", ...params });
      expect(terminal).toMatchObject({ type: "error", code: "invalid_request", data: { field } });
      expect(terminal.message).toContain(field);
    }
    expect(h.llama.requests).toHaveLength(0);
    expect(existsSync(h.dataDir)).toBe(false);
  });

  test("an unknown agent is invalid_request; memory recalls an earlier session's turn", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const bad = await h.chat(1, { input: "x", agent: "nobody" });
    expect(bad.terminal).toMatchObject({ type: "error", code: "invalid_request", data: { field: "agent" } });
    h.llama.script({ content: ["The capybara is named Pancake."] }, { content: ["Pancake"] });
    await h.chat(2, { input: "remember: my capybara is called Pancake", session_id: "m1" });
    const { events } = await h.chat(3, { input: "what is my capybara called?", session_id: "m2" });
    expect(events.find((e) => e.event === "memory_done")).toEqual(expect.objectContaining({ hits: 1 }));
    expect(names(events).slice(0, 3)).toEqual(["run_start", "memory_start", "memory_done"]);
    // The notes go with the user message, never into the system prompt (docs/agent.md#prompt-reuse:
    // a stable prefix).
    const messages = h.llama.requests[1]?.body.messages ?? [];
    expect(messages[0]).toEqual({ role: "system", content: "You are a helpful assistant." });
    expect(messages.at(-1)?.role).toBe("user");
    expect(messages.at(-1)?.content).toContain("Pancake");
    expect(String(messages.at(-1)?.content).endsWith("what is my capybara called?")).toBe(true);
  });
});

describe("an unreadable checkpoint", () => {
  test("is dropped with a warning that quotes none of its text, in the result and in the log", async () => {
    await using h = new ChatHarness();
    const c = h.services.store().conversations;
    c.ensureSession("default_user", "bad", "assistant", "hi", new Date());
    // Not JSON: the parser's message would quote the token it stopped at.
    c.saveCheckpoint("default_user", "bad", `{"turn": secretword123}`, new Date());
    const lines: string[] = [];
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      h.llama.script({ content: "fresh" });
      const { terminal } = await h.chat(1, { session_id: "bad", input: "again", resume: true });
      expect(terminal.type).toBe("result");
      const warnings = (terminal.result as { warnings: { code: string; message: string }[] }).warnings;
      expect(warnings.map((w) => w.code)).toContain("checkpoint_reset");
      expect(JSON.stringify(warnings)).not.toContain("secretword123");
      expect(lines.some((l) => l.includes("checkpoint of session bad"))).toBe(true);
      expect(lines.join("\n")).not.toContain("secretword123");
    } finally {
      warn.mockRestore();
    }
  });
});
