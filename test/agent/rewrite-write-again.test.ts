import { expect, test } from "bun:test";
import { REPLY_AGAIN } from "../../src/agent/write-again.ts";
import { ChatHarness } from "./harness.ts";

// A turn the model had to write again keeps the core's request for it as a user message: that
// message is the core's, and regenerate and replace_from take the user's own.
test("regenerate after a re-prompted turn runs the user's question again, not the core's request", async () => {
  await using h = new ChatHarness();
  h.llama.script(
    { unparsed: "<tool_call>\n<function=t__echo>\n</parameter>" },
    { content: ["fine now"] },
    { content: ["answered again"] },
  );
  await h.chat(1, { input: "what is 2+2", session_id: "u" });
  expect(h.history("u").map((m) => m.content)).toEqual([
    "what is 2+2",
    "<tool_call>\n<function=t__echo>\n</parameter>",
    REPLY_AGAIN,
    "fine now",
  ]);
  // The core's request is no message the user can edit.
  const edit = await h.chat(2, { session_id: "u", replace_from: 2, input: "edited" });
  expect(edit.terminal).toMatchObject({
    type: "error",
    code: "invalid_request",
    data: { field: "replace_from" },
  });
  expect(String(edit.terminal.message)).toContain("its user messages: 0)");
  const again = await h.chat(3, { session_id: "u", regenerate: true });
  expect(again.terminal.result).toMatchObject({ response: "answered again" });
  expect(h.history("u")).toEqual([
    { role: "user", content: "what is 2+2" },
    { role: "assistant", content: "answered again" },
  ]);
  const sent = h.llama.requests.at(-1)?.body.messages;
  expect(sent?.map((m: { role: string }) => m.role)).toEqual(["system", "user"]);
});

/** A method's result, run through the harness. */
async function call(h: ChatHarness, id: string, method: string, params: Record<string, unknown>) {
  h.send(id, method, params);
  return (await h.terminal(id)).result as any;
}

test("the core's requests to write again are not shown to the host as the user's words", async () => {
  await using h = new ChatHarness();
  // Three replies that never parse: the turn stops at max_parse_errors with no answer text.
  const bad = { unparsed: "<tool_call>\n<function=t__echo>\n</parameter>" };
  h.llama.script(bad, bad, bad);
  await h.chat(1, { input: "what is 2+2", session_id: "u" });
  // The model still had them, in their place.
  expect(h.history("u").filter((m) => m.content === REPLY_AGAIN)).toHaveLength(3);
  const got = await call(h, "g", "sessions.get", { session_id: "u" });
  const shown = got.messages.map((m: { seq: number; role: string; content: string }) => [m.seq, m.role]);
  expect(shown).toEqual([
    [0, "user"],
    [1, "assistant"],
    [3, "assistant"],
    [5, "assistant"],
    [7, "assistant"],
  ]);
  expect(got.session).toMatchObject({ title: "what is 2+2", message_count: 5 });
  const list = await call(h, "l", "sessions.list", {});
  expect(list.sessions[0].preview).not.toContain("could not be read");
  expect(list.sessions[0].preview).toContain("<tool_call>");
  const search = await call(h, "s", "sessions.search", { query: "format" });
  expect(search.hits).toEqual([]);
  const md = await call(h, "e", "sessions.export", { session_id: "u", format: "markdown" });
  expect(md.content).not.toContain("could not be read");
  expect(md.content).toContain("what is 2+2");
});

test("a user who types the core's request has a message like any other", async () => {
  await using h = new ChatHarness();
  h.llama.script({ content: ["noted"] }, { content: ["noted again"] }, { content: ["edited answer"] });
  await h.chat(1, { input: REPLY_AGAIN, session_id: "t" });
  const got = await call(h, "g", "sessions.get", { session_id: "t" });
  expect(got.messages.map((m: { content: string }) => m.content)).toEqual([REPLY_AGAIN, "noted"]);
  const list = await call(h, "l", "sessions.list", {});
  expect(list.sessions[0]).toMatchObject({ preview: "noted", message_count: 2 });
  const search = await call(h, "s", "sessions.search", { query: "format" });
  expect(search.hits).toMatchObject([{ session_id: "t", seq: 0 }]);
  // regenerate runs it again; replace_from takes its seq.
  const again = await h.chat(2, { session_id: "t", regenerate: true });
  expect(again.terminal.result).toMatchObject({ response: "noted again" });
  expect(h.llama.requests.at(-1)?.body.messages.at(-1)).toEqual({ role: "user", content: REPLY_AGAIN });
  const edit = await h.chat(3, { session_id: "t", replace_from: 0, input: "something else" });
  expect(edit.terminal.result).toMatchObject({ response: "edited answer" });
});

test("an interrupted turn an earlier version saved keeps its request to write again the core's", async () => {
  await using h = new ChatHarness();
  // A checkpoint as a core before the mark wrote it: the request is a plain user message.
  h.writeCheckpoint("c", {
    version: 1,
    trace_id: "0000000000000000",
    user_input: "hello",
    agent: "assistant",
    step: 1,
    parse_errors: 1,
    best_text: "",
    turn: [
      { role: "user", content: "hello" },
      { role: "assistant", content: "<tool_call>broken" },
      { role: "user", content: REPLY_AGAIN },
    ],
    updated_at: "2026-01-01T00:00:00.000Z",
  });
  h.llama.script({ content: ["hi"] });
  await h.chat("r", { session_id: "c", resume: true });
  const got = await call(h, "g", "sessions.get", { session_id: "c" });
  expect(got.messages.map((m: { seq: number }) => m.seq)).toEqual([0, 1, 3]);
  const edit = await h.chat("x", { session_id: "c", replace_from: 2, input: "edited" });
  expect(edit.terminal).toMatchObject({ type: "error", data: { field: "replace_from" } });
});
