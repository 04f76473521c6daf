import { expect, test } from "bun:test";
import { estimateTokens, trimHistory } from "../../src/agent/context-budget.ts";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";

const turn = (n: number, size: number): ChatMessage[] => [
  { role: "user", content: `q${n} ${"x".repeat(size)}` },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: `c${n}`, type: "function", function: { name: "t", arguments: "{}" } }],
  },
  { role: "tool", tool_call_id: `c${n}`, content: "r" },
  { role: "assistant", content: `a${n}` },
];

test("estimates about 4 characters per token", () => {
  expect(estimateTokens("x".repeat(400))).toBe(100);
});

test("keeps the newest whole turns that fit and never splits a tool call from its result", () => {
  const history = [...turn(1, 400), ...turn(2, 400), ...turn(3, 400)];
  const oneTurn = turn(3, 400).reduce((n, m) => n + estimateTokens(m), 0);
  const { kept, dropped } = trimHistory(history, oneTurn * 2 + 5);
  expect(dropped).toBe(4);
  expect(kept[0]?.role).toBe("user");
  expect(String(kept[0]?.content).startsWith("q2")).toBe(true);
  expect(kept).toHaveLength(8);
  expect(trimHistory(history, 0).kept).toEqual([]);
  expect(trimHistory(history, 1_000_000).dropped).toBe(0);
});
