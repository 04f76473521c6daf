import { describe, expect, test } from "bun:test";
import { imagesFrom } from "../../../src/agent/context-budget.ts";
import { emptyRecord } from "../../../src/agent/kv/prompt-record.ts";
import { PromptLayout } from "../../../src/agent/turn/prompt-layout.ts";
import { imageBodyBytes } from "../../../src/images/limits.ts";
import type { ChatMessage } from "../../../src/protocol/chat-message.ts";

// docs/protocol.md#images: the history's images go as `[image]` before any text goes, oldest
// turns first, and that point stays put while the rest fits, so the slot's prefix holds; a model
// that reads no images gets them all as `[image]`.

const IMAGE = 500;
/** Turns of a user message with one image and an answer. */
const history = (turns: number): ChatMessage[] =>
  Array.from({ length: turns }, (_, i) => [
    {
      role: "user" as const,
      content: `look ${i}`,
      attachments: [{ id: i + 1, mime: "image/png", bytes: 10 }],
    },
    { role: "assistant" as const, content: `seen ${i}` },
  ]).flat();
const costs = (vision = true) => ({
  costOf: (m: ChatMessage) => (m.role === "user" ? (m.attachments?.length ?? 0) * IMAGE : 0),
  vision,
});
const imagesSent = (sent: ChatMessage[]) =>
  sent.filter((m) => m.role === "user" && m.attachments?.length).map((m) => m.content);
const placeholders = (sent: ChatMessage[]) =>
  sent.filter((m) => m.role === "user" && m.content.endsWith("[image]")).map((m) => m.content);

describe("the history's images in the prompt", () => {
  test("all are sent while they fit", () => {
    const h = history(3);
    const sent = new PromptLayout(emptyRecord(), [], h.length, costs()).history(h, 10_000);
    expect(imagesSent(sent)).toEqual(["look 0", "look 1", "look 2"]);
    expect(placeholders(sent)).toEqual([]);
  });

  test("over the budget, the oldest turns' images become [image] and every text stays", () => {
    const h = history(4);
    const layout = new PromptLayout(emptyRecord(), [], h.length, costs());
    const sent = layout.history(h, 1600);
    expect(sent).toHaveLength(8);
    expect(placeholders(sent)).toEqual(["look 0\n\n[image]", "look 1\n\n[image]", "look 2\n\n[image]"]);
    expect(imagesSent(sent)).toEqual(["look 3"]);
    expect(layout.record(true).image_cut).toBe(6);
  });

  test("the point stays where it was next turn while the rest fits (the prefix holds)", () => {
    const h = history(4);
    const first = new PromptLayout(emptyRecord(), [], h.length, costs());
    first.history(h, 1600);
    const longer = history(5);
    const next = new PromptLayout(first.record(true), [], longer.length, costs());
    const sent = next.history(longer, 10_000);
    expect(placeholders(sent)).toHaveLength(3);
    expect(imagesSent(sent)).toEqual(["look 3", "look 4"]);
  });

  test("past the request body llama-server reads, the oldest images go too, the turn's own always sent", () => {
    // Four turns of 3 MB images would fit any token budget here; the body has room for the
    // turn's own image and two more (docs/protocol.md#images).
    const big = (m: ChatMessage): ChatMessage =>
      m.role === "user" ? { ...m, attachments: m.attachments?.map((a) => ({ ...a, bytes: 3_000_000 })) } : m;
    const h = history(4).map(big);
    const each = imageBodyBytes({ mime: "image/png", bytes: 3_000_000 });
    const layout = new PromptLayout(emptyRecord(), [], h.length, { ...costs(), bodyBytes: each * 3 + 10 });
    const turn = [
      big({ role: "user", content: "and this", attachments: [{ id: 99, mime: "image/png", bytes: 1 }] }),
    ];
    expect(layout.turnMessages(turn)[0]).toMatchObject({ attachments: [{ id: 99 }] });
    const sent = layout.history(h, 1_000_000);
    expect(placeholders(sent)).toEqual(["look 0\n\n[image]", "look 1\n\n[image]"]);
    expect(imagesSent(sent)).toEqual(["look 2", "look 3"]);
    expect(layout.record(true).image_cut).toBe(3);
  });

  test("a model that reads no images gets every one as [image], and the record keeps its point", () => {
    const h = history(2);
    const layout = new PromptLayout({ cut: 0, notes: [], image_cut: 2 }, [], h.length, costs(false));
    const sent = layout.history(h, 10_000);
    expect(imagesSent(sent)).toEqual([]);
    expect(placeholders(sent)).toHaveLength(2);
    expect(layout.record(true).image_cut).toBe(2);
  });

  test("imagesFrom: nothing moves while everything fits; past the budget, the first turn start leaving half", () => {
    const h = history(4);
    const text = () => 10;
    const image = (i: number) => (i % 2 === 0 ? IMAGE : 0);
    expect(imagesFrom(h, text, image, 0, 0, 10_000)).toBe(0);
    expect(imagesFrom(h, text, image, 0, 2, 10_000)).toBe(2);
    // 80 of text + 4 images = 2080 > 2000: keep at most 1000, so images from seq 6 (one image).
    expect(imagesFrom(h, text, image, 0, 0, 2000)).toBe(6);
    expect(imagesFrom(h, text, image, 0, 0, 50)).toBe(8);
  });
});
