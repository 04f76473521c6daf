import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { manyToolsServer } from "../fixtures/mcp-hostile.ts";
import { ChatHarness, type Msg, names } from "./harness.ts";

// docs/protocol.md#chat: a reply that fills its slot's context ends with a result and a
// context_full warning; a prompt that cannot fit even with no history is refused with
// invalid_request and the token counts, leaving the session as it was. Recordings: transcripts 22,
// 22b (the 400 exceed_context_size_error), 23, 23b (finish_reason "length" at n_ctx).

const readHistory = (h: ChatHarness, session: string) => h.history(session);
const mcpCalls = (h: ChatHarness) =>
  existsSync(h.mcpLog) ? readFileSync(h.mcpLog, "utf8").split("\n").filter(Boolean) : [];

interface ChatResult {
  response: string;
  warnings: { code: string; message: string }[];
}

function expectContextFull(terminal: Msg, response: string): { code: string; message: string } {
  expect(terminal.type).toBe("result");
  const result = terminal.result as ChatResult;
  expect(result.response).toBe(response);
  expect(result.warnings.map((w) => w.code)).toEqual(["context_full"]);
  const warning = result.warnings[0] as { code: string; message: string };
  // The slot size (SseLlama's /props n_ctx) and the settings that give a reply more room.
  expect(warning.message).toContain("8192 tokens per slot");
  expect(warning.message).toContain("model.context");
  expect(warning.message).toContain("llama.parallel");
  return warning;
}

/** One SSE chunk as llama-server streams it (transcript 23b). */
const sse = (choice: Record<string, unknown>) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, ...choice }], object: "chat.completion.chunk" })}\n\n`;

describe("chat: a reply that fills the slot's context", () => {
  test("ends with a result: the text so far, final, a context_full warning, and the turn committed", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["so", " much", " to", " say"], finish_reason: "length" });
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "ov" });
    const warning = expectContextFull(terminal, "so much to say");
    expect(warning.message).toContain("model.max_tokens");
    expect(names(events).slice(-2)).toEqual(["llm_done", "final"]);
    expect(events.at(-1)).toMatchObject({ event: "final", step: 0, response: "so much to say" });
    expect(names(events)).not.toContain("loop_abort");
    // Committed like any result: history saved, checkpoint gone, and the next turn sees it.
    expect(readHistory(h, "ov")).toEqual([
      { role: "user", content: "x" },
      { role: "assistant", content: "so much to say" },
    ]);
    expect(h.checkpoint("ov") !== undefined).toBe(false);
    h.llama.script({ content: ["ok"] });
    await h.chat(2, { input: "y", session_id: "ov" });
    expect(h.llama.requests[1]?.body.messages.slice(1).map((m) => m.content)).toEqual([
      "x",
      "so much to say",
      "y",
    ]);
  });

  test("a length stop below the configured reply cap is the context filling, not the cap", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 100 }] });
    h.llama.script({ content: ["so", " much"], finish_reason: "length" });
    const { terminal } = await h.chat(1, { input: "x" });
    expectContextFull(terminal, "so much");
  });

  test("a tool call cut off by the full context ends the turn with the text before it, not a re-prompt", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { content: ["Let me look.", ' <tool_call>{"name": "t__echo", "argu'], finish_reason: "length" },
      { content: ["never asked"] },
    );
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "tc" });
    expectContextFull(terminal, "Let me look.");
    expect(h.llama.requests).toHaveLength(1);
    expect(names(events)).not.toContain("tool_start");
    expect(events.at(-1)).toMatchObject({ event: "final", response: "Let me look." });
    // The history stays a valid conversation: no half call in it.
    expect(readHistory(h, "tc")).toEqual([
      { role: "user", content: "x" },
      { role: "assistant", content: "Let me look." },
    ]);
  });

  test("a native tool call cut off by the full context is not run", async () => {
    await using h = new ChatHarness();
    h.llama.script({
      raw: [
        sse({ finish_reason: null, delta: { role: "assistant", content: null } }),
        sse({ finish_reason: null, delta: { content: "Checking." } }),
        sse({
          finish_reason: null,
          delta: {
            tool_calls: [
              { index: 0, id: "c1", type: "function", function: { name: "t__echo", arguments: '{"te' } },
            ],
          },
        }),
        sse({ finish_reason: "length", delta: {} }),
        "data: [DONE]\n\n",
      ],
    });
    const { terminal, events } = await h.chat(1, { input: "x" });
    expectContextFull(terminal, "Checking.");
    expect(h.llama.requests).toHaveLength(1);
    expect(names(events)).not.toContain("tool_start");
    expect(mcpCalls(h)).toEqual([]);
  });

  test("a complete call in a reply that then filled the context is not run either", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      {
        content: ['<tool_call>{"name": "t__echo", "arguments": {"text": "hi"}}</tool_call>', " and"],
        finish_reason: "length",
      },
      { content: ["never asked"] },
    );
    const { terminal, events } = await h.chat(1, { input: "x" });
    expectContextFull(terminal, "and");
    expect(h.llama.requests).toHaveLength(1);
    expect(names(events)).not.toContain("tool_start");
    expect(mcpCalls(h)).toEqual([]);
  });

  test("the turn's own tool results outgrowing the slot end with a result, the tool result kept", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { content: ["Looking."], tool_calls: [{ name: "t__echo", arguments: { text: "big" } }] },
      { overflow: true },
    );
    const { terminal, events } = await h.chat(1, { input: "x", session_id: "grow" });
    const warning = expectContextFull(terminal, "Looking.");
    expect(warning.message).toContain("8292");
    expect(names(events).slice(-3)).toEqual(["llm_start", "llm_done", "final"]);
    const history = readHistory(h, "grow");
    expect(history.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(history.at(-1)).toEqual({ role: "assistant", content: "Looking." });
    expect(h.checkpoint("grow") !== undefined).toBe(false);
  });

  // docs/agent.md#history-trimming: the turn's own results the model has answered go as notes
  // before the turn ends; it ended context_outgrown, though only its newest result was unread.
  test("llama-server refusing the turn: its answered tool results are left out, the newest sent whole", async () => {
    await using h = new ChatHarness();
    // 3,000 of the stand-in's tokens in each result (its calls' arguments cost it little): two fit
    // its 8,192, three do not, three with the first two left out do (the estimate counts half).
    const call = (n: number) => ({
      content: [`Look ${n}.`],
      tool_calls: [{ name: "t__echo", arguments: { text: `r${n} ${"w ".repeat(3000)}` } }],
    });
    h.llama.script(call(1), call(2), call(3), { content: ["Done."] });
    const { terminal } = await h.chat(1, { input: "x", session_id: "own" });
    expect(terminal.result).toMatchObject({ response: "Done.", warnings: [] });
    const sent = h.llama.requests.at(-1)?.body.messages ?? [];
    const results = sent.filter((m) => m.role === "tool").map((m) => String(m.content));
    const note = "[tool result left out to fit the context: 6009 characters]";
    expect(results).toEqual([note, note, `echo: r3 ${"w ".repeat(3000)}`]);
    // The database keeps every result whole.
    const kept = readHistory(h, "own").filter((m) => m.role === "tool");
    expect(kept.map((m) => String(m.content).length)).toEqual([6009, 6009, 6009]);
  });

  // The same refused beside an earlier turn: the history was halved, then dropped (its cut never
  // comes back) before the answered results went, and the next turns were sent without it.
  test("llama-server refusing the turn: its answered results go before the history does", async () => {
    await using h = new ChatHarness();
    const call = (n: number) => ({
      content: [`Look ${n}.`],
      tool_calls: [{ name: "t__echo", arguments: { text: `r${n} ${"w ".repeat(3000)}` } }],
    });
    h.llama.script({ content: ["Hi Ann."] }, call(1), call(2), call(3), { content: ["Done."] });
    const earlier = `my name is Ann ${"v ".repeat(60)}`;
    await h.chat(0, { input: earlier, session_id: "own" });
    const { terminal } = await h.chat(1, { input: "x", session_id: "own" });
    expect(terminal.result).toMatchObject({ response: "Done.", warnings: [] });
    const sent = h.llama.requests.at(-1)?.body.messages ?? [];
    expect(sent.map((m) => m.content)).toContain(earlier);
    const results = sent.filter((m) => m.role === "tool").map((m) => String(m.content).length);
    expect(results).toEqual([58, 58, 6009]);
  });

  test("an estimate over the slot: the oldest answered results go until the turn fits, the newest whole", async () => {
    await using h = new ChatHarness();
    // 12,000 characters, some 3,000 tokens as estimated: the budget is 8,192 less 1,024 for the reply.
    const call = { content: ["Look."], tool_calls: [{ name: "t__huge", arguments: { chars: 12_000 } }] };
    h.llama.script(call, call, call, { content: ["Done."] });
    const { terminal } = await h.chat(1, { input: "x", session_id: "est" });
    expect(terminal.result).toMatchObject({ response: "Done.", warnings: [] });
    const sent = h.llama.requests.map((r) =>
      r.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content).length),
    );
    // Two fit; the third step's request leaves the first out, and the last keeps it out (sticky).
    expect(sent).toEqual([[], [12_000], [12_000, 12_000], [59, 12_000, 12_000]]);
  });

  // The history's cut never comes back: a whole turn dropped for the turn's own results, though
  // leaving out one the model had answered made room, was lost to every later turn.
  test("the turn's answered results go before a whole turn of the history would", async () => {
    await using h = new ChatHarness();
    const earlier = `my name is Ann ${"n".repeat(6000)}`; // some 1,500 tokens as estimated
    const call = { content: ["Look."], tool_calls: [{ name: "t__huge", arguments: { chars: 12_000 } }] };
    h.llama.script({ content: ["Hello Ann."] }, call, call, { content: ["Done."] });
    await h.chat(1, { input: earlier, session_id: "keep" });
    const { terminal } = await h.chat(2, { input: "x", session_id: "keep" });
    expect(terminal.result).toMatchObject({ response: "Done.", warnings: [] });
    const last = h.llama.requests.at(-1)?.body.messages ?? [];
    // The earlier turn is sent; the first result, answered, is the note; the unread one whole.
    expect(last.map((m) => m.content)).toContain(earlier);
    expect(last.filter((m) => m.role === "tool").map((m) => String(m.content).length)).toEqual([59, 12_000]);
  });

  test("the configured reply cap still gives reply_truncated", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 2 }] });
    h.llama.script({ content: ["so", " much"], finish_reason: "length" });
    const { terminal } = await h.chat(1, { input: "x" });
    expect(terminal.result).toMatchObject({ response: "so much", warnings: [{ code: "reply_truncated" }] });
  });
});

describe("chat: a prompt that cannot fit", () => {
  test("is refused with invalid_request and the token counts, the session left untouched", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ overflow: true });
    const { terminal, events } = await h.chat(1, { input: "a very long paste", session_id: "big" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "context_overflow", n_prompt_tokens: 8292, n_ctx: 8192 },
    });
    expect(terminal.message).toContain("8292");
    expect(terminal.message).toContain("8192");
    expect(terminal.message).toContain("shorten the input");
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "context_overflow", step: 0 });
    expect(h.history("big")).toEqual([]);
    expect(h.checkpoint("big")).toBeUndefined();
    // The refused turn leaves no empty session behind for the host's list.
    expect(h.services.store().list("default_user", 10).sessions).toEqual([]);
  });

  test("refused for the agent's tools: the error says so, names their tokens and server, and does not blame the input", async () => {
    await using h = new ChatHarness(
      { agents: [{ name: "toolful", tools: ["h.*"] }], mcp_servers: [manyToolsServer("h", 128)] },
      { standIn: () => ({ nCtx: 2048 }) },
    );
    const { terminal, events } = await h.chat(1, { input: "go", session_id: "tools" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "context_overflow" },
    });
    const message = String(terminal.message);
    expect(message).not.toContain("shorten the input");
    expect(message).toMatch(
      /the 128 tools of agent 'toolful' take about \d+ of them \(by server: 'h' 128 tools, about \d+ tokens\)/,
    );
    expect(message).toContain("tools: patterns");
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "context_overflow" });
  });

  test("is tried with less and then no history before it is refused; the history stays as it was", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    for (let i = 1; i <= 4; i++) {
      h.llama.script({ content: [`a${i}`] });
      await h.chat(i, { input: `q${i}`, session_id: "hist" });
    }
    const before = h.history("hist");
    for (let i = 0; i < 6; i++) h.llama.script({ overflow: true });
    const { terminal } = await h.chat(5, { input: "q5", session_id: "hist" });
    expect(terminal).toMatchObject({ type: "error", code: "invalid_request" });
    const tries = h.llama.requests.slice(4).map((r) => r.body.messages.length);
    expect(tries[0]).toBe(10);
    for (let i = 1; i < tries.length; i++) expect(tries[i]).toBeLessThan(tries[i - 1] as number);
    // Refused only once nothing more could be left out: system prompt and the input alone.
    expect(tries.at(-1)).toBe(2);
    expect(tries.length).toBeLessThanOrEqual(4);
    expect(h.history("hist")).toEqual(before);
    expect(h.checkpoint("hist") !== undefined).toBe(false);
  });

  test("a refused turn leaves the prompt as it was: the next turn sends the whole history again", async () => {
    // Its retries left out the history; that was its own input's doing, not the history's
    // (seen with the real llama-server: every later turn lost the conversation).
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    for (let i = 1; i <= 4; i++) {
      h.llama.script({ content: [`a${i}`] });
      await h.chat(i, { input: `q${i}`, session_id: "kept" });
    }
    // All of it, half of it, none of it: each refused.
    for (let i = 0; i < 3; i++) h.llama.script({ overflow: true });
    const { terminal } = await h.chat(5, { input: "a long paste", session_id: "kept" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "context_overflow" },
    });
    const refused = h.llama.requests.length;
    expect(h.llama.requests.at(-1)?.body.messages.length).toBe(2);
    h.llama.script({ content: ["a6"] });
    const next = await h.chat(6, { input: "q6", session_id: "kept" });
    expect(next.terminal.type).toBe("result");
    const sent = h.llama.requests[refused]?.body.messages as { content: string }[];
    // The system prompt, the four turns, the new input.
    expect(sent.length).toBe(10);
    expect(sent[1]?.content).toContain("q1");
  });

  test("a turn refused after its retries left out the history (its schema refused at the answer): the next turn sends the whole history", async () => {
    // With tools the free steps carry no schema: their retries cut the history to fit, the model
    // answers, and only the constrained step meets llama-server's converter 400 (95d's words).
    // Keeping that turn's cut sent every later turn without the conversation before it.
    await using h = new ChatHarness();
    for (let i = 1; i <= 4; i++) {
      h.llama.script({ content: [`a${i}`] });
      await h.chat(i, { input: `q${i}`, session_id: "kept" });
    }
    const refused = "JSON schema conversion failed:\nUnsupported ref: #/x";
    h.llama.script({ overflow: true }, { overflow: true }, { content: ["ok"] });
    h.llama.script({ error: { status: 400, message: refused } });
    const format = { type: "json_schema", schema: { type: "object" } };
    const { terminal } = await h.chat(5, {
      input: "a long paste",
      session_id: "kept",
      response_format: format,
    });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    const before = h.llama.requests.length;
    // The free step that answered was sent without the history.
    expect(h.llama.requests[before - 2]?.body.messages.length).toBe(2);
    h.llama.script({ content: ["a6"] });
    const next = await h.chat(6, { input: "q6", session_id: "kept" });
    expect(next.terminal.type).toBe("result");
    const sent = h.llama.requests[before]?.body.messages as { content: string }[];
    // The system prompt, the four turns, the new input.
    expect(sent.length).toBe(10);
    expect(sent[1]?.content).toContain("q1");
  });

  test("an interrupted turn's checkpoint survives a refused new turn", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    const checkpoint = {
      version: 1 as const,
      trace_id: "0000000000000000",
      user_input: "the interrupted one",
      agent: "plain",
      step: 0,
      parse_errors: 0,
      best_text: "",
      turn: [{ role: "user" as const, content: "the interrupted one" }],
      updated_at: "2026-01-01T00:00:00.000Z",
    };
    h.writeCheckpoint("cp", checkpoint);
    h.llama.script({ overflow: true });
    const { terminal } = await h.chat(1, { input: "too long", session_id: "cp" });
    expect(terminal).toMatchObject({ type: "error", code: "invalid_request" });
    const { updated_at: _u, ...kept } = h.checkpoint("cp") as typeof checkpoint;
    const { updated_at: _v, ...original } = checkpoint;
    expect(kept).toEqual(original);
    expect(h.history("cp")).toEqual([]);
  });
});
