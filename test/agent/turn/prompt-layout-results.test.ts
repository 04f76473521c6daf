import { expect, test } from "bun:test";
import { emptyRecord } from "../../../src/agent/kv/prompt-record.ts";
import { PromptLayout } from "../../../src/agent/turn/prompt-layout.ts";
import type { ChatMessage } from "../../../src/protocol/chat-message.ts";

// docs/agent.md#history-trimming: a turn that read a large tool result went whole once the
// history overflowed, its answer with it, and the cut never comes back: every later turn was sent
// without the conversation (the model no longer knew what it had found, nor the user's name).
// Earlier turns' tool results go first, as the history's images do, before any whole turn.

const toolTurn = (result: string): ChatMessage[] => [
  { role: "user", content: "my name is Ann; read the file" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "c1", type: "function", function: { name: "t__read", arguments: "{}" } }],
  },
  { role: "tool", tool_call_id: "c1", content: result },
  { role: "assistant", content: "The file says forty-two." },
];

test("an earlier turn's large tool result is left out before the turn and its answer are", () => {
  const history = toolTurn("x".repeat(20_000));
  const layout = new PromptLayout(emptyRecord(), [], history.length);
  const sent = layout.history(history, 1000);
  expect(sent.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
  expect(sent[2]?.content).toContain("left out");
  expect(sent[2]?.content).toContain("20000 characters");
  expect(sent[3]?.content).toBe("The file says forty-two.");
  expect(layout.cut).toBe(0);
  // Kept as the cut is: the next turn sends the same prefix.
  const record = layout.record(true);
  const next = new PromptLayout(record, [], history.length + 2);
  const later = [
    ...history,
    { role: "user", content: "and?" },
    { role: "assistant", content: "42" },
  ] as ChatMessage[];
  expect(next.history(later, 10_000)).toEqual([...sent, ...later.slice(4)]);
});

test("results that fit are sent whole", () => {
  const history = toolTurn("y".repeat(2000));
  const layout = new PromptLayout(emptyRecord(), [], history.length);
  expect(layout.history(history, 1000)).toEqual(history);
  expect(layout.record(true)).toEqual(emptyRecord());
});

test("a chat after a turn that read a large result still sends that turn's answer", async () => {
  const { ChatHarness } = await import("../harness.ts");
  await using h = new ChatHarness({}, { standIn: () => ({ nCtx: 2048 }) });
  h.llama.script(
    { tool_calls: [{ name: "t__huge", arguments: { chars: 5000 } }] },
    { content: "The file says forty-two." },
    { content: "It said forty-two." },
  );
  await h.chat("c1", { input: "read the file", session_id: "s" });
  const { terminal } = await h.chat("c2", { input: "what did the file say?", session_id: "s" });
  expect(terminal.type).toBe("result");
  const sent = h.llama.requests[2]?.body.messages.map((m) => m.content) ?? [];
  expect(sent).toContain("The file says forty-two.");
  expect(sent.at(-1)).toBe("what did the file say?");
});

// A history over its budget for its words, not its results: leaving every result out could not
// make it fit, so whole turns went as well, and the last turn's result, which fitted in what was
// kept, was sent as a note from then on (the result cut is sticky): the turns dropped were enough.
test("a recent result that fits once older turns are dropped is sent whole", () => {
  const talk = (i: number): ChatMessage[] => [
    { role: "user", content: `question ${i} ${"w".repeat(2000)}` },
    { role: "assistant", content: `answer ${i}` },
  ];
  const history = [...Array.from({ length: 10 }, (_, i) => talk(i)).flat(), ...toolTurn("z".repeat(1000))];
  const layout = new PromptLayout(emptyRecord(), [], history.length);
  const sent = layout.history(history, 2000);
  expect(layout.cut).toBeGreaterThan(0);
  expect(sent).toEqual(history.slice(layout.cut));
  expect(layout.record(true).result_cut).toBeUndefined();
});

// The turn's own results: the oldest the model has answered go first, sticky; the last step's
// results, which the model has not read, never (docs/agent.md#history-trimming).
const call = (id: string, reasoning?: string): ChatMessage => ({
  role: "assistant",
  content: null,
  ...(reasoning === undefined ? {} : { reasoning_content: reasoning }),
  tool_calls: [{ id, type: "function", function: { name: "t__read", arguments: "{}" } }],
});
const result = (id: string, content = "x".repeat(4000)): ChatMessage => ({
  role: "tool",
  tool_call_id: id,
  content,
});
/** A turn of two tool-calling steps, the second's result not read yet. */
const twoSteps = (content?: string, reasoning?: string): ChatMessage[] => [
  { role: "user", content: "read" },
  call("a", reasoning),
  result("a", content),
  call("b", reasoning),
  result("b", content),
];

test("fitTurn leaves out the turn's answered results oldest first, never the unread one, and keeps them out", () => {
  const turn = twoSteps();
  const layout = new PromptLayout(emptyRecord(), [], 0);
  expect(layout.fitTurn(turn, 100_000)).toEqual(turn);
  // Nothing left to fit in: the answered result goes, the unread one stays whole.
  const tight = layout.fitTurn(turn, 0);
  expect(tight[2]?.content).toBe("[tool result left out to fit the context: 4000 characters]");
  expect(tight[4]).toBe(turn[4]);
  // Room enough again: it stays out for the turn (the prompt's prefix does not flip back).
  const more = [...turn, call("c"), result("c")];
  const later = layout.fitTurn(more, 100_000);
  expect(later[2]?.content).toContain("left out");
  expect(later[4]).toBe(more[4]);
  expect(layout.fitTurn(more)[4]?.content).toContain("left out");
  expect(layout.fitTurn(more)[6]).toBe(more[6]);
});

// The room fitTurn gets beside the history: its answered results go where that keeps every
// history turn (their results left out), and not where turns would go all the same.
test("turnRoom leaves the history's bare cost out of the room only where the turn can then fit", () => {
  const history = toolTurn("x".repeat(20_000));
  const turn = [{ role: "user", content: "again" } as ChatMessage, ...toolTurn("y".repeat(8000)).slice(1, 3)];
  turn.push({ role: "assistant", content: "read" }, { role: "user", content: "and?" });
  const layout = new PromptLayout(emptyRecord(), [], history.length);
  const room = layout.turnRoom(history, turn, 1000);
  // The history with its result left out is some 110 tokens: the turn gets the rest.
  expect(room).toBeLessThan(1000);
  expect(room).toBeGreaterThan(850);
  expect(layout.fitTurn(turn, room)[2]?.content).toContain("8000 characters");
  // A history that would not fit even bare: the turn's own room, its turns going anyway.
  const long = Array.from({ length: 40 }, () => toolTurn("z".repeat(100))).flat();
  const other = new PromptLayout(emptyRecord(), [], long.length);
  expect(other.turnRoom(long, turn, 1000)).toBe(1000);
});

// A thinking model's earlier steps (docs/agent.md#thinking-and-structured-output): their
// thinking went back whole however little room was left, so a turn of a few long-thought tool
// calls ended context_outgrown though the model had acted on every thought but the last.
test("fitTurn leaves out the reasoning of the turn's answered steps with their results, never the last step's", () => {
  const turn = twoSteps("short", "hmm ".repeat(1000));
  const layout = new PromptLayout(emptyRecord(), [], 0);
  expect(layout.fitTurn(turn, 100_000)).toEqual(turn);
  const tight = layout.fitTurn(turn, 0);
  // Left out, never null (llama-server refuses a null reasoning_content with a 500, 91g).
  expect("reasoning_content" in (tight[1] as object)).toBe(false);
  expect(tight[1]).toMatchObject({ role: "assistant", tool_calls: [{ id: "a" }] });
  expect(tight[3]).toBe(turn[3]);
});
