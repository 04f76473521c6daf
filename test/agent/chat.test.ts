import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { ChatHarness, names, streamed, streamNames } from "./harness.ts";

const calls = (h: ChatHarness) =>
  existsSync(h.mcpLog)
    ? readFileSync(h.mcpLog, "utf8")
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { tool: string })
    : [];

/** The events of a turn that answers without tools, its chunks counted once. */
const PLAIN_ANSWER = [
  "run_start",
  "memory_start",
  "memory_done",
  "llm_start",
  "llm_chunk",
  "llm_done",
  "final",
];

describe("chat: answers and tools", () => {
  test("plain answer streams chunks and ends with a result", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
    h.llama.script({ content: ["Hel", "lo", " there"] });
    const { terminal, events } = await h.chat("c1", { input: "hi", session_id: "s1" });
    expect(streamNames(events)).toEqual(PLAIN_ANSWER);
    // Deltas that come close together may be joined (docs/protocol.md#joined-pieces).
    expect(streamed(events)).toBe("Hello there");
    expect(events[0]).toMatchObject({ user_input: "hi", session_id: "s1" });
    expect(terminal).toMatchObject({
      type: "result",
      result: { response: "Hello there", session_id: "s1", warnings: [], dropped_events: 0 },
    });
    const result = terminal.result as { trace_id: string };
    expect(result.trace_id).toMatch(/^[0-9a-f]{16}$/);
    const req = h.llama.requests[0];
    expect(req?.auth).toBe(`Bearer ${h.llama.apiKey}`);
    expect(req?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(req?.body.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(req?.body.messages.at(-1)).toEqual({ role: "user", content: "hi" });
    // History in the database, checkpoint gone.
    expect(h.history("s1")).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", content: "Hello there" },
    ]);
    expect(h.checkpoint("s1")).toBeUndefined();
  });

  // The request asks return_progress (docs/agent.md "Progress"): while the prompt is read the
  // server sends role deltas with prompt_progress and no content (transcripts/98b). They are no
  // piece of the answer and no first token: the host sees the content's chunks alone, and
  // ttft_ms counts to the first token, past the batches.
  test("the prompt's progress events reach the host as nothing: no llm_chunk, not the first token", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
    h.llama.script({ content: ["Hel", "lo", " there"], prompt_batches: 3, batch_ms: 100 });
    const { terminal, events } = await h.chat("c1", { input: "hi", session_id: "s1" });
    expect(h.llama.requests[0]?.body).toMatchObject({ return_progress: true });
    expect(streamNames(events)).toEqual(PLAIN_ANSWER);
    const chunks = events.filter((e) => e.event === "llm_chunk").map((e) => e.delta as string);
    expect(chunks.every((d) => d.length > 0)).toBe(true);
    expect(chunks.join("")).toBe("Hello there");
    const usage = (terminal.result as { usage: { ttft_ms: number } }).usage;
    expect(usage.ttft_ms).toBeGreaterThanOrEqual(3 * 100 - 5);
  });

  test("default session id is 8 characters of a-z0-9 and history carries into the next turn", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["one"] }, { content: ["two"] });
    const first = await h.chat(1, { input: "first" });
    const sid = (first.terminal.result as { session_id: string }).session_id;
    expect(sid).toMatch(/^[a-z0-9]{8}$/);
    await h.chat(2, { input: "second", session_id: sid });
    const msgs = h.llama.requests[1]?.body.messages.map((m) => `${m.role}:${m.content}`);
    expect(msgs?.slice(1)).toEqual(["user:first", "assistant:one", "user:second"]);
  });

  test("one tool call runs and its result goes back to the model", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: { text: "ping" }, id: "call0xyz" }] },
      { content: ["done"] },
    );
    const { terminal, events } = await h.chat("c", { input: "use echo" });
    expect(names(events)).toEqual([
      "run_start",
      "memory_start",
      "memory_done",
      "llm_start",
      "llm_done",
      "tool_start",
      "tool_done",
      "llm_start",
      "llm_chunk",
      "llm_done",
      "final",
    ]);
    expect(events.find((e) => e.event === "tool_start")).toMatchObject({
      step: 0,
      tool: "t.echo",
      args: { text: "ping" },
    });
    expect(events.find((e) => e.event === "tool_done")).toMatchObject({
      step: 0,
      tool: "t.echo",
      status: "ok",
      preview: "echo: ping",
      retryable: false,
    });
    expect(terminal.result).toMatchObject({ response: "done" });
    const tools = h.llama.requests[0]?.body.tools as { function: { name: string } }[];
    expect(tools.map((t) => t.function.name).sort()).toEqual([
      "t__crash",
      "t__echo",
      "t__fail",
      "t__huge",
      "t__slow",
      "t__write_note",
    ]);
    const second = h.llama.requests[1]?.body.messages ?? [];
    expect(second.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call0xyz", content: "echo: ping" });
    expect(second.at(-2)).toMatchObject({
      role: "assistant",
      tool_calls: [{ id: "call0xyz", function: { name: "t__echo" } }],
    });
  });

  test("several tool calls in one step, an error and a huge output", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      {
        tool_calls: [
          { name: "t__echo", arguments: { text: "a" } },
          { name: "t__fail", arguments: { message: "nope" } },
          { name: "t__huge", arguments: { chars: 50_000 } },
        ],
      },
      { content: ["ok"] },
    );
    const { terminal, events } = await h.chat("c", { input: "go" });
    const done = events.filter((e) => e.event === "tool_done");
    expect(done.map((e) => [e.tool, e.status])).toEqual([
      ["t.echo", "ok"],
      ["t.fail", "error"],
      ["t.huge", "ok"],
    ]);
    expect(String(done[2]?.preview).length).toBeLessThanOrEqual(200);
    const toolMsgs = h.llama.requests[1]?.body.messages.filter((m) => m.role === "tool") ?? [];
    expect(toolMsgs[1]?.content).toContain("nope");
    expect(String(toolMsgs[2]?.content).length).toBeLessThan(17_000);
    expect(toolMsgs[2]?.content).toContain("truncated");
    expect(terminal.type).toBe("result");
  });

  test("a tool needing approval is denied without approve_execution, run with it", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__write_note", arguments: { text: "x" } }] },
      { content: ["cannot"] },
    );
    const denied = await h.chat("d", { input: "write", session_id: "a1" });
    expect(denied.events.find((e) => e.event === "tool_done")).toMatchObject({
      status: "denied",
      retryable: false,
    });
    expect(h.llama.requests[1]?.body.messages.at(-1)?.content).toContain("requires the user's approval");
    expect(calls(h).filter((c) => c.tool === "write_note")).toHaveLength(0);

    h.llama.script(
      { tool_calls: [{ name: "t__write_note", arguments: { text: "y" } }] },
      { content: ["written"] },
    );
    const granted = await h.chat("g", { input: "write", session_id: "a2", approve_execution: true });
    expect(granted.events.find((e) => e.event === "tool_done")).toMatchObject({
      status: "ok",
      preview: "wrote: y",
    });
    expect(calls(h).filter((c) => c.tool === "write_note")).toHaveLength(1);
  });

  test("a crashed MCP server gives a retryable error and is restarted on next use", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__crash", arguments: {} }] },
      { tool_calls: [{ name: "t__echo", arguments: { text: "back" } }] },
      { content: ["fine"] },
    );
    const { terminal, events } = await h.chat("c", { input: "crash it" });
    const done = events.filter((e) => e.event === "tool_done");
    expect(done[0]).toMatchObject({ tool: "t.crash", status: "error", retryable: true });
    expect(done[1]).toMatchObject({ tool: "t.echo", status: "ok" });
    const pids = new Set(calls(h).map((c) => (c as unknown as { pid: number }).pid));
    expect(pids.size).toBe(2);
    expect(terminal.type).toBe("result");
  });
});

describe("chat: parsing and limits", () => {
  test("a malformed call is re-prompted and then recovered", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { content: ['<tool_call>{"name": "t__echo", "arguments": {"text": "a"</tool_call>'] },
      { content: ['<tool_call>{"name": "t__echo", "arguments": {"text": "fixed"}}</tool_call>'] },
      { content: ["all good"] },
    );
    const { terminal, events } = await h.chat("c", { input: "x" });
    expect(terminal.result).toMatchObject({ response: "all good", warnings: [] });
    expect(h.llama.requests[1]?.body.messages.at(-1)?.content).toContain("not valid JSON");
    expect(events.find((e) => e.event === "tool_done")).toMatchObject({
      tool: "t.echo",
      preview: "echo: fixed",
    });
  });

  test("past max_parse_errors the loop aborts but still returns a result", async () => {
    await using h = new ChatHarness();
    const bad = { content: ["Let me try. ", '<tool_call>{"name": "nope", "arguments": {}}</tool_call>'] };
    h.llama.script(bad, bad, bad);
    const { terminal, events } = await h.chat("c", { input: "x" });
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "max_parse_errors" });
    expect(terminal.type).toBe("result");
    const result = terminal.result as { response: string; warnings: { code: string }[] };
    expect(result.warnings.map((w) => w.code)).toEqual(["max_parse_errors"]);
    expect(result.response).toBe("Let me try.");
    expect(h.llama.requests).toHaveLength(3);
  });

  test("native call to an unknown tool counts as a parse error with a tool message back", async () => {
    await using h = new ChatHarness();
    h.llama.script({ tool_calls: [{ name: "t__missing", arguments: {} }] }, { content: ["ok"] });
    const { terminal } = await h.chat("c", { input: "x" });
    expect(terminal.result).toMatchObject({ response: "ok" });
    expect(h.llama.requests[1]?.body.messages.at(-1)).toMatchObject({ role: "tool" });
    expect(h.llama.requests[1]?.body.messages.at(-1)?.content).toContain("unknown tool 't__missing'");
  });

  test("the step limit ends with loop_abort and a result", async () => {
    await using h = new ChatHarness({ agents: [{ name: "a", tools: ["t.echo"], max_steps: 2 }] });
    const call = { tool_calls: [{ name: "t__echo", arguments: { text: "again" } }], content: ["thinking"] };
    h.llama.script(call, call, call);
    const { terminal, events } = await h.chat("c", { input: "loop" });
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "max_steps", step: 1 });
    expect(terminal.result).toMatchObject({ response: "thinking", warnings: [{ code: "max_steps" }] });
    expect(h.llama.requests).toHaveLength(2);
    expect(h.llama.requests[0]?.body.tools).toHaveLength(1);
  });

  test("context overflow is retried with less history, then refused as invalid_request", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    h.llama.script({ content: ["a"] }, { overflow: true }, { content: ["b"] });
    await h.chat(1, { input: "one", session_id: "ov" });
    const second = await h.chat(2, { input: "two", session_id: "ov" });
    expect(second.terminal.result).toMatchObject({ response: "b" });
    expect(h.llama.requests[2]?.body.messages.length).toBeLessThan(
      h.llama.requests[1]?.body.messages.length ?? 0,
    );

    h.llama.script({ overflow: true });
    const third = await h.chat(3, { input: "three", session_id: "fresh" });
    expect(third.terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "context_overflow", n_prompt_tokens: 8292, n_ctx: 8192 },
    });
    expect(third.events.at(-1)).toMatchObject({ event: "loop_abort", reason: "context_overflow" });
  });
});
