import { expect, spyOn, test } from "bun:test";
import { emptyRecord } from "../../../src/agent/kv/prompt-record.ts";
import { PromptLayout } from "../../../src/agent/turn/prompt-layout.ts";
import type { ChatMessage } from "../../../src/protocol/chat-message.ts";

// A long session's first turn with no prompt record (a new core, its slot's save gone) lays out
// the history from seq 0: each message costed as JSON once per pass, four passes, held the main
// loop ~280 ms at 100,000 messages.
test("a long history's layout costs each message's text once, not once for each of its passes", () => {
  const n = 2000;
  const history = Array.from(
    { length: n },
    (_, i): ChatMessage =>
      i % 2 ? { role: "assistant", content: `answer ${i}` } : { role: "user", content: `question ${i}` },
  );
  const layout = new PromptLayout(emptyRecord(), [], n);
  layout.turnMessages([{ role: "user", content: "next" }]);
  const stringify = spyOn(JSON, "stringify");
  try {
    const kept = layout.history(history, 500);
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(n);
    expect(stringify.mock.calls.length).toBeLessThanOrEqual(n + kept.length);
  } finally {
    stringify.mockRestore();
  }
});

// turnRoom, asked before each step's layout, costed the whole history from its cut: 100k
// messages again at a long session's first turn. It stops once the history is over the room.
test("the turn's room beside a long history costs no more of it than fits the room", () => {
  const n = 2000;
  const history = Array.from(
    { length: n },
    (_, i): ChatMessage => ({ role: "user", content: `question ${i}` }),
  );
  const layout = new PromptLayout(emptyRecord(), [], n);
  const turn: ChatMessage[] = [{ role: "user", content: "next" }];
  layout.turnMessages(turn);
  const stringify = spyOn(JSON, "stringify");
  try {
    expect(layout.turnRoom(history, turn, 500)).toBe(500);
    expect(stringify.mock.calls.length).toBeLessThan(200);
  } finally {
    stringify.mockRestore();
  }
});
