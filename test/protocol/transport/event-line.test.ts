import { describe, expect, test } from "bun:test";
import { EventLines } from "../../../src/protocol/transport/event-line.ts";

// The line made without the message object must be, byte for byte, the one the spread made
// (docs/performance.md, "Where a streamed piece's CPU goes").
const plain = (id: unknown, event: string, fields: object) =>
  `${JSON.stringify({ ...fields, id, type: "event", event })}\n`;

const exact = (JSON as unknown as { rawJSON(t: string): unknown }).rawJSON("18446744073709551616");

describe("EventLines", () => {
  test("the same line as JSON.stringify({...fields, id, type, event}) for every kind of id and field", () => {
    const lines = new EventLines();
    const cases: [unknown, string, object][] = [
      ["c1", "llm_chunk", { step: 0, delta: "Hello" }],
      ["c1", "llm_chunk", { step: 0, delta: 'quote " back \\ newline \n tab \t \u0001 é 😀' }],
      ["c1", "llm_reasoning", { step: 0, delta: "think" }],
      ["c1", "llm_chunk", { step: 1, delta: "" }],
      [7, "llm_chunk", { step: 0, delta: "x" }],
      [exact, "llm_chunk", { step: 0, delta: "y" }],
      ["c2", "run_start", {}],
      ["c2", "tool_done", { name: "t", result: { a: [1, 2] }, skipped: undefined }],
      ["c2", "odd", { id: "mine", type: "x", event: "y", n: 1 }],
      ["c2", "odd", { event: "only" }],
      ["c1", "llm_chunk", { step: 0, delta: "back to c1" }],
    ];
    for (const [id, event, fields] of cases)
      expect(lines.line(id, event, fields)).toBe(plain(id, event, fields));
  });

  test("a number id a double cannot hold is written as sent", () => {
    expect(new EventLines().line(exact, "llm_chunk", { delta: "z" })).toBe(
      '{"delta":"z","id":18446744073709551616,"type":"event","event":"llm_chunk"}\n',
    );
  });

  test("an event whose fields cannot be serialized is dropped, not thrown to the turn", () => {
    const lines = new EventLines();
    const deep = JSON.parse(`${"[".repeat(49_000)}${"]".repeat(49_000)}`);
    expect(lines.line("c", "e", { n: 1n })).toBeUndefined();
    expect(lines.line("c", "tool_start", { args: { a: deep } })).toBeUndefined();
    expect(lines.line("c", "e", { id: "x", n: 1n })).toBeUndefined();
    expect(lines.line("c", "e", { n: 1 })).toBe(plain("c", "e", { n: 1 }));
  });
});
