import { describe, expect, test } from "bun:test";
import { imagesFrom, KEEP_AFTER_TRIM, trimInSteps } from "../../src/agent/context-budget.ts";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
import { imagesBefore, random, trimBefore } from "../fixtures/cut-walks.ts";

// trimInSteps and imagesFrom sum the costs from the end and stop once over the budget: a long
// session's first turn (no prompt record) costed all 100k messages to send the few that fit.
// The cuts must be exactly those of the walks as they were (test/fixtures/cut-walks.ts).

interface Case {
  h: ChatMessage[];
  text: number[];
  image: number[];
  cut: number;
  imageCut: number;
  budget: number;
}

function randomCase(next: () => number, least: number): Case {
  const int = (n: number) => Math.floor(next() * n);
  const n = int(4) === 0 ? int(4) : int(60);
  const h = Array.from({ length: n }, (): ChatMessage => {
    const r = int(6);
    if (r === 0) return { role: "user", content: "q" };
    if (r === 1) return { role: "user", content: "again", by_core: true };
    if (r === 2) return { role: "tool", tool_call_id: "c", content: "r" };
    return { role: "assistant", content: "a" };
  });
  const cost = () => least + (int(10) === 0 ? int(2000) : int(40));
  const text = h.map(cost);
  const image = h.map((m) => (m.role === "user" && int(3) === 0 ? int(3000) : 0));
  const total = text.reduce((a, b) => a + b, 0) + image.reduce((a, b) => a + b, 0);
  const budgets = [-5, -1, 0, 1, int(total + 1), int(2 * total + 2), total, Math.floor(total / 2), 1.5];
  return {
    h,
    text,
    image,
    cut: int(n + 3),
    imageCut: int(n + 3),
    budget: budgets[int(budgets.length)] ?? 0,
  };
}

describe("trimInSteps and imagesFrom walked from the end", () => {
  test("give the cuts the whole walks gave, on random histories, costs and budgets", () => {
    const next = random(64);
    for (let k = 0; k < 20_000; k++) {
      const c = randomCase(next, k % 2 ? 7 : 0);
      const text = (i: number) => c.text[i] ?? 0;
      const image = (i: number) => c.image[i] ?? 0;
      const got = {
        k,
        trim: trimInSteps(c.h, text, c.cut, c.budget),
        images: imagesFrom(c.h, text, image, c.cut, c.imageCut, c.budget),
      };
      const want = {
        k,
        trim: trimBefore(c.h, text, c.cut, c.budget),
        images: imagesBefore(c.h, text, image, c.cut, c.imageCut, c.budget),
      };
      if (got.trim !== want.trim || got.images !== want.images) expect({ ...got, c }).toEqual({ ...want, c });
    }
  });

  test("an odd budget (none, nothing, not a number) gives what it gave", () => {
    const next = random(7);
    for (let k = 0; k < 2000; k++) {
      const c = randomCase(next, 7);
      const text = (i: number) => c.text[i] ?? 0;
      const image = (i: number) => c.image[i] ?? 0;
      for (const budget of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0]) {
        expect(trimInSteps(c.h, text, c.cut, budget)).toBe(trimBefore(c.h, text, c.cut, budget));
        expect(imagesFrom(c.h, text, image, c.cut, c.imageCut, budget)).toBe(
          imagesBefore(c.h, text, image, c.cut, c.imageCut, budget),
        );
      }
    }
  });

  test("cost no more messages than fit the budget, however long the history", () => {
    // Every message costs at least 7 tokens as sent (estimateTokens: 6 and the JSON's `{}`).
    const n = 100_000;
    const h = Array.from(
      { length: n },
      (_, i): ChatMessage => (i % 2 ? { role: "assistant", content: "a" } : { role: "user", content: "q" }),
    );
    const budget = 7000;
    let texts = 0;
    let images = 0;
    const text = () => {
      texts++;
      return 7;
    };
    const image = () => {
      images++;
      return 0;
    };
    expect(imagesFrom(h, text, image, 0, 0, budget)).toBe(n);
    expect(texts).toBeLessThanOrEqual(budget / 7 + 1);
    expect(images).toBe(0);
    texts = 0;
    const cut = trimInSteps(h, text, 0, budget);
    expect(cut).toBe(n - Math.floor(budget * KEEP_AFTER_TRIM) / 7);
    expect(texts).toBeLessThanOrEqual(budget / 7 + 1);
  });
});
