import { describe, expect, test } from "bun:test";
import {
  estimateAll,
  estimateTokens,
  imagesFrom,
  KEEP_AFTER_TRIM,
  trimInSteps,
} from "../../src/agent/context-budget.ts";
import { REPLY_AGAIN } from "../../src/agent/write-again.ts";
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

const history = (turns: number) => Array.from({ length: turns }, (_, i) => turn(i + 1, 400)).flat();
const costOf = (h: ChatMessage[]) => (i: number) => estimateTokens(h[i]);
const oneTurn = turn(1, 400).reduce((n, m) => n + estimateTokens(m), 0);

test("estimates about 4 characters per token", () => {
  expect(estimateTokens("x".repeat(400))).toBe(100);
});

describe("trimInSteps (docs/agent.md#history-trimming: in large steps)", () => {
  test("everything fits: nothing is cut", () => {
    const h = history(3);
    expect(trimInSteps(h, costOf(h), 0, 1_000_000)).toBe(0);
  });

  test("an overflow drops whole turns at once, down to KEEP_AFTER_TRIM of the budget, never splitting a call from its result", () => {
    const h = history(10);
    const budget = oneTurn * 8;
    const cut = trimInSteps(h, costOf(h), 0, budget);
    expect(cut % 4).toBe(0);
    expect(h[cut]?.role).toBe("user");
    const kept = (h.length - cut) / 4;
    expect(kept * oneTurn).toBeLessThanOrEqual(budget * KEEP_AFTER_TRIM);
    // At least a quarter of the budget's worth went beyond what the overflow needed.
    expect(kept * oneTurn).toBeLessThanOrEqual(budget * 0.75);
  });

  test("the cut stays while what follows it fits, though turns were added since: the prefix is the one the slot holds", () => {
    const h = history(10);
    const budget = oneTurn * 8;
    const cut = trimInSteps(h, costOf(h), 0, budget);
    const grown = [...h, ...turn(11, 400), ...turn(12, 400)];
    expect(trimInSteps(grown, costOf(grown), cut, budget)).toBe(cut);
    // Until it overflows again: then another large step.
    const more = [...grown, ...history(6)];
    expect(trimInSteps(more, costOf(more), cut, budget)).toBeGreaterThan(cut + 4 * 2);
  });

  test("a cut inside a turn (the history was rewritten) moves to the next turn; past the end, nothing is sent", () => {
    const h = history(4);
    expect(trimInSteps(h, costOf(h), 5, 1_000_000)).toBe(8);
    expect(trimInSteps(h, costOf(h), 40, 1_000_000)).toBe(h.length);
    expect(trimInSteps(h, costOf(h), 0, 0)).toBe(h.length);
  });

  test("the core's request to write again opens no turn: a cut never sends it without its question", () => {
    // Each turn: the question, a reply that could not be read, the core's request, the answer.
    const again = (n: number): ChatMessage[] => [
      { role: "user", content: `q${n} ${"x".repeat(400)}` },
      { role: "assistant", content: `garbled ${"y".repeat(400)}` },
      { role: "user", content: REPLY_AGAIN, by_core: true },
      { role: "assistant", content: `a${n}` },
    ];
    const h = Array.from({ length: 10 }, (_, i) => again(i + 1)).flat();
    const budget = estimateAll(again(1)) * 8;
    for (const cut of [0, 2, 6]) {
      const from = trimInSteps(h, costOf(h), cut, budget);
      expect(from % 4).toBe(0);
      expect(h[from]?.content).not.toBe(REPLY_AGAIN);
    }
    // A cut left at the request (the history was rewritten since) moves to the next question.
    expect(trimInSteps(h, costOf(h), 2, 1_000_000)).toBe(4);
  });

  test("a user's own message with the text of the core's request opens a turn like any other", () => {
    const h: ChatMessage[] = [
      { role: "user", content: `q ${"x".repeat(400)}` },
      { role: "assistant", content: `a ${"y".repeat(400)}` },
      { role: "user", content: REPLY_AGAIN },
      { role: "assistant", content: "a2" },
    ];
    expect(trimInSteps(h, costOf(h), 2, 1_000_000)).toBe(2);
    expect(trimInSteps(h, costOf(h), 0, 2 * estimateAll(h.slice(2)) + 2)).toBe(2);
  });

  test("the cost of a message as sent counts (a user message with its memory notes)", () => {
    const h = history(4);
    const heavy = (i: number) => (i === 12 ? 1_000_000 : estimateTokens(h[i]));
    expect(trimInSteps(h, heavy, 0, oneTurn * 3)).toBe(h.length);
  });
});

describe("trimInSteps on a long session with a cut kept", () => {
  test("only the messages from the cut are costed: those before it are never sent", () => {
    // Each step of each turn: a JSON.stringify per message of the whole history, 100k of them.
    const h = history(500);
    const cut = h.length - 40;
    let asked = 0;
    const cost = (i: number) => {
      asked++;
      expect(i).toBeGreaterThanOrEqual(cut);
      return estimateTokens(h[i]);
    };
    expect(trimInSteps(h, cost, cut, 1_000_000)).toBe(cut);
    expect(trimInSteps(h, cost, cut, oneTurn * 8)).toBeGreaterThan(cut);
    expect(asked).toBeLessThanOrEqual(2 * (h.length - cut));
  });
});

describe("imagesFrom on a long session (sessions.* with 100k messages: the core answers ping)", () => {
  test("each message's cost is asked a bounded number of times, not once per turn it follows", () => {
    // A first turn in a session of thousands of messages (no prompt record yet: a restart, an
    // import) walked the whole history once per turn start: 20k messages held the loop 41 s.
    const h = history(500);
    let asked = 0;
    const text = (i: number) => {
      asked++;
      return estimateTokens(h[i]);
    };
    const image = (i: number) => (h[i]?.role === "user" ? 1000 : 0);
    const cut = imagesFrom(h, text, image, 0, 0, oneTurn * 2000);
    expect(cut).toBeGreaterThan(0);
    expect(h[cut]?.role).toBe("user");
    expect(asked).toBeLessThanOrEqual(2 * h.length);
  });

  test("the cut is where walking every turn finds it", () => {
    const h = history(50);
    const text = (i: number) => estimateTokens(h[i]);
    const image = (i: number) => (h[i]?.role === "user" ? 1000 : 0);
    const budget = oneTurn * 60;
    const slow = (from: number, cut: number) => {
      let n = 0;
      for (let i = from; i < h.length; i++) n += text(i) + (i >= cut ? image(i) : 0);
      return n;
    };
    // The walk as it was: each turn start's cost summed from `from` anew.
    const walked = (from: number, imageCut: number) => {
      if (slow(from, imageCut) <= budget) return imageCut;
      for (let s = 4; s < h.length; s += 4)
        if (s > imageCut && slow(from, s) <= Math.floor(budget * KEEP_AFTER_TRIM)) return s;
      return h.length;
    };
    for (const from of [0, 8, 13, 200]) {
      for (const imageCut of [0, 4, 40, 120, 300]) {
        const want = walked(from, imageCut);
        expect({ from, imageCut, cut: imagesFrom(h, text, image, from, imageCut, budget) }).toEqual({
          from,
          imageCut,
          cut: want,
        });
      }
    }
  });
});
