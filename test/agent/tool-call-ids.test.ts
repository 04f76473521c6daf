import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { MAX_TOOL_CALL_ID_CHARS } from "../../src/llama/tool-call-deltas.ts";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
import { waitFor } from "../fixtures/wait.ts";
import { ChatHarness } from "./harness.ts";

// A call's id is how a resume tells the calls already answered from the rest, and how the model
// pairs each result with its call: the ids of a step are made unique and bounded
// (docs/agent.md#tool-calls). A model writes its own ids in some chat formats, and can repeat one.

const calls = (h: ChatHarness) =>
  existsSync(h.mcpLog)
    ? readFileSync(h.mcpLog, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { tool: string })
    : [];

/** Each call of each assistant message answered by exactly one tool message, and no tool message left over. */
function paired(history: ChatMessage[]): boolean {
  const asked = history.flatMap((m) => (m.role === "assistant" ? (m.tool_calls ?? []).map((c) => c.id) : []));
  const answered = history.flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : []));
  return new Set(asked).size === asked.length && [...asked].sort().join() === [...answered].sort().join();
}

test("calls sharing one id: a resume after a cancel between them runs the one not run", async () => {
  await using h = new ChatHarness();
  // The cancel's module loaded first: the cancel below is read as it arrives, not after an import.
  h.send("warm", "cancel", { request_id: "nobody" });
  expect((await h.terminal("warm")).result).toEqual({ cancelled: false });
  h.llama.script({
    tool_calls: [
      { name: "t__echo", arguments: { text: "first" }, id: "same" },
      { name: "t__slow", arguments: { ms: 1500 }, id: "same" },
    ],
  });
  h.send("c1", "chat", { input: "work", session_id: "dup" });
  await h.waitFor((m) => m.event === "tool_start" && m.tool === "t.slow");
  expect(await waitFor(() => calls(h).some((c) => c.tool === "slow"))).toBe(true);
  h.send("k", "cancel", { request_id: "c1" });
  expect(await h.terminal("c1")).toMatchObject({ type: "error", code: "cancelled" });

  h.llama.script({ content: ["resumed"] });
  const { terminal, events } = await h.chat("c2", { session_id: "dup", resume: true });
  expect(terminal.result).toMatchObject({ response: "resumed" });
  // Without unique ids the echo's answer counted for both, and the slow call was never run again.
  expect(events.filter((e) => e.event === "tool_start").map((e) => e.tool)).toEqual(["t.slow"]);
  expect(paired(h.history("dup"))).toBe(true);
});

test("a missing, repeated, overlong or unprintable id is replaced; a usable one is kept", async () => {
  await using h = new ChatHarness();
  const long = "i".repeat(1_000_000);
  h.llama.script(
    {
      tool_calls: [
        { name: "t__echo", arguments: { text: "a" }, id: "call_1" },
        { name: "t__echo", arguments: { text: "b" }, id: "call_1" },
        { name: "t__echo", arguments: { text: "c" }, id: long },
        { name: "t__echo", arguments: { text: "d" }, id: "bad\nid\u202e" },
        { name: "t__echo", arguments: { text: "e" }, id: "" },
      ],
    },
    { content: ["done"] },
  );
  const { terminal } = await h.chat("c", { input: "x", session_id: "ids" });
  expect(terminal.result).toMatchObject({ response: "done" });
  const history = h.history("ids");
  expect(paired(history)).toBe(true);
  const ids = history.flatMap((m) => (m.role === "assistant" ? (m.tool_calls ?? []).map((c) => c.id) : []));
  expect(ids[0]).toBe("call_1");
  for (const id of ids) expect(id).toMatch(new RegExp(`^[\\x21-\\x7e]{1,${MAX_TOOL_CALL_ID_CHARS}}$`));
  expect(JSON.stringify(history).length).toBeLessThan(5000);
  // What the next step sent the model pairs the same way.
  expect(paired(h.llama.requests[1]?.body.messages as ChatMessage[])).toBe(true);
});

test("an id that spells a marker of the model reaches llama-server broken, call and result alike", async () => {
  await using h = new ChatHarness();
  // Printable ASCII within the length: kept. Some templates (Mistral's) render a call's id and its
  // result's tool_call_id into the prompt, where a marker's text would be read as the marker.
  h.llama.script(
    { tool_calls: [{ name: "t__echo", arguments: { text: "a" }, id: "<|im_end|>" }] },
    { content: ["done"] },
  );
  const { terminal } = await h.chat("c", { input: "x", session_id: "marker-id" });
  expect(terminal.result).toMatchObject({ response: "done" });
  const sent = h.llama.requests[1]?.body.messages as ChatMessage[];
  expect(JSON.stringify(sent)).not.toContain("<|im_end|>");
  expect(paired(sent)).toBe(true);
  // The store keeps what was said.
  expect(JSON.stringify(h.history("marker-id"))).toContain('"id":"<|im_end|>"');
});
