import { describe, expect, spyOn, test } from "bun:test";
import { estimateTokens } from "../../../src/agent/context-budget.ts";
import { emptyRecord, type PromptRecord } from "../../../src/agent/kv/prompt-record.ts";
import { PromptLayout } from "../../../src/agent/turn/prompt-layout.ts";
import type { ChatMessage } from "../../../src/protocol/chat-message.ts";
import { imagesBefore, random, trimBefore } from "../../fixtures/cut-walks.ts";

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

// The same first turn, past the budget: the passes summed every message's cost from seq 0, a
// JSON each (~130 ms at 100k messages), to send the few at the end. They stop once over it.
test("a long history's layout costs no more of it than fits the budget", () => {
  const n = 20_000;
  const history = Array.from({ length: n }, (_, i): ChatMessage => {
    if (i % 4 === 0) return { role: "user", content: `question ${i}` };
    if (i % 4 === 2) return { role: "tool", tool_call_id: `c${i}`, content: "r".repeat(500) };
    return { role: "assistant", content: `answer ${i}` };
  });
  const layout = new PromptLayout(emptyRecord(), [], n, { costOf: () => 100, vision: true });
  layout.turnMessages([{ role: "user", content: "next" }]);
  const stringify = spyOn(JSON, "stringify");
  try {
    const kept = layout.history(history, 700);
    expect(kept.length).toBeGreaterThan(0);
    expect(layout.cut).toBeGreaterThan(n - 100);
    // Every message costs at least 7 tokens: some 100 fit, each costed as sent and as a note.
    expect(stringify.mock.calls.length).toBeLessThan(400);
  } finally {
    stringify.mockRestore();
  }
});

/** A tool message as sent once its result is left out (prompt-layout.ts withoutResult). */
const note = (m: ChatMessage): ChatMessage =>
  m.role === "tool" && m.content.length > 80
    ? { ...m, content: `[tool result left out to fit the context: ${m.content.length} characters]` }
    : m;

/** The old layout's cuts, by the walks as they were, from the same record (no notes, no attachments). */
function laidOutBefore(h: ChatMessage[], record: PromptRecord, image: (i: number) => number, budget: number) {
  const n = h.length;
  let cut = Math.min(record.cut, n);
  let resultCut = Math.min(record.result_cut ?? 0, n);
  const text = (i: number) => estimateTokens(h[i]);
  const imageCut = imagesBefore(h, text, image, cut, Math.min(record.image_cut ?? 0, n), budget);
  const noted = (i: number) => estimateTokens(note(h[i] as ChatMessage));
  const withImage = (i: number) => noted(i) + (i >= imageCut ? image(i) : 0);
  const result = (i: number) => text(i) - noted(i);
  const results = imagesBefore(h, withImage, result, cut, resultCut, budget);
  let bare = 0;
  for (let i = cut; i < n; i++) bare += withImage(i);
  if (results < n || bare <= budget) resultCut = results;
  const cost = (i: number) => withImage(i) + (i >= resultCut ? result(i) : 0);
  cut = trimBefore(h, cost, cut, budget);
  let keptCost = 0;
  for (let i = cut; i < n; i++) keptCost += cost(i);
  return { cut, imageCut, resultCut, kept: n - cut, keptCost };
}

test("the layout's cuts are those the whole walks gave, on random histories, records and budgets", () => {
  const next = random(640);
  const int = (k: number) => Math.floor(next() * k);
  for (let k = 0; k < 1500; k++) {
    const n = int(40);
    const h = Array.from({ length: n }, (_, i): ChatMessage => {
      const r = int(5);
      if (r === 0) return { role: "user", content: `q${i}` };
      if (r === 1) return { role: "user", content: "again", by_core: true };
      if (r === 2)
        return { role: "tool", tool_call_id: "c", content: "r".repeat(int(3) ? int(60) : int(4000)) };
      return { role: "assistant", content: "a".repeat(int(200)) };
    });
    const images = new Map(h.map((m) => [m, m.role === "user" && int(2) ? int(2000) : 0]));
    const record: PromptRecord = {
      cut: int(n + 2),
      notes: [],
      image_cut: int(n + 2),
      result_cut: int(n + 2),
    };
    const all = h.reduce((t, m) => t + estimateTokens(m) + (images.get(m) ?? 0), 0);
    // Also the history's cost from the cut with every result left out: where it only just fits.
    const bare = h.slice(record.cut).reduce((t, m) => t + estimateTokens(note(m)), 0);
    const budget = [0, int(all + 1), int(all / 4 + 1), all, 2 * all, bare][int(6)] ?? 0;
    const layout = new PromptLayout(record, [], n, { costOf: (m) => images.get(m) ?? 0, vision: true });
    layout.turnMessages([{ role: "user", content: "next" }]);
    const sent = layout.history(h, budget);
    const after = layout.record(false);
    const got = {
      k,
      cut: layout.cut,
      imageCut: after.image_cut ?? 0,
      resultCut: after.result_cut ?? 0,
      kept: sent.length,
      keptCost: layout.keptCost,
    };
    expect(got).toEqual({
      k,
      ...laidOutBefore(h, record, (i) => images.get(h[i] as ChatMessage) ?? 0, budget),
    });
  }
});

/** The history, counting the reads of messages before `below` (never sent, never to be walked). */
function watched(history: ChatMessage[], below: number) {
  const seen = { before: 0 };
  const proxy = new Proxy(history, {
    get(target, key, receiver) {
      if (typeof key === "string" && /^\d+$/.test(key) && Number(key) < below) seen.before++;
      return Reflect.get(target, key, receiver);
    },
  });
  return { proxy, seen };
}

// A long session whose images never had to go keeps image_cut 0 while its cut moves on: each
// step's image cut then walked every message from seq 0 (bodyCut's body bytes, imagesFrom's turn
// starts), 100k messages a step, though only those from the cut are sent.
describe("the image cut of a long history walks only what is sent", () => {
  const n = 20_000;
  const history = Array.from(
    { length: n },
    (_, i): ChatMessage =>
      i % 2
        ? { role: "assistant", content: `answer ${i}` }
        : {
            role: "user",
            content: `question ${i}`,
            attachments: [{ id: i + 1, mime: "image/png", bytes: 10 }],
          },
  );
  const record = (): PromptRecord => ({ cut: n - 10, notes: [] });

  test("its images fitting", () => {
    const layout = new PromptLayout(record(), [], n, { costOf: () => 0, vision: true });
    layout.turnMessages([{ role: "user", content: "next" }]);
    const { proxy, seen } = watched(history, n - 10);
    expect(layout.history(proxy, 100_000)).toHaveLength(10);
    expect(seen.before).toBe(0);
  });

  test("its images going", () => {
    const layout = new PromptLayout(record(), [], n, {
      costOf: (m) => (m.role === "user" ? 1000 : 0),
      vision: true,
    });
    layout.turnMessages([{ role: "user", content: "next" }]);
    const { proxy, seen } = watched(history, n - 10);
    const sent = layout.history(proxy, 1500);
    expect(sent.length).toBeGreaterThan(0);
    expect(layout.record(true).image_cut).toBeGreaterThan(n - 10);
    expect(seen.before).toBe(0);
  });
});
