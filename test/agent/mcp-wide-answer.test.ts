import { afterAll, beforeAll, expect, spyOn, test } from "bun:test";
import { MAX_SHALLOW_VALUES, MCP_LOOK_FROM_CHARS } from "../../src/util/json-shape.ts";
import { Interleaving } from "../fixtures/interleave.ts";
import { calling } from "../fixtures/mcp-silent-child.ts";
import { waitFor } from "../fixtures/wait.ts";

/** The length of each text JSON.parse was given. */
const parsed: number[] = [];
/** Told of each parse of a long text, as it starts. */
let onLongParse = () => {};
const parse = JSON.parse;
let spy: { mockRestore(): void } | undefined;
beforeAll(() => {
  spy = spyOn(JSON, "parse").mockImplementation(((text: string, ...rest: []) => {
    if (typeof text === "string") parsed.push(text.length);
    if (typeof text === "string" && text.length > MCP_LOOK_FROM_CHARS) onLongParse();
    return parse(text, ...rest);
  }) as typeof JSON.parse);
});
afterAll(() => spy?.mockRestore());

// A result of 120,000 keys of its own is 1 MB, under the 1 MiB from which a line was counted
// first: JSON.parse, the SDK's JSON-RPC schema and its tools/call schema (loose objects, each
// copying every key) held the main loop about 300 ms on a 2-core machine, and a ping or cancel
// waited behind it (a hostile review). Only the keys of the message and its result are walked by
// those schemas: more than MAX_SHALLOW_VALUES there is refused before the parse, as its call's answer.
test("an answer wide at its top, under 1 MiB, fails its call unparsed", async () => {
  const { line, got } = await calling();
  const keys = Array.from({ length: 30_000 }, (_, i) => `"k${i}":0`).join(",");
  const text = `{"jsonrpc":"2.0","id":0,"result":{"content":[],${keys}}}`;
  line(text);
  await waitFor(() => got.length > 0);
  expect(parsed).not.toContain(text.length);
  const [answer] = got as [{ id: number; error?: { message: string } }];
  expect(answer.id).toBe(0);
  expect(answer.error?.message).toContain(`at most ${MAX_SHALLOW_VALUES} are read`);
});

test("an answer as long but deep is parsed as it is", async () => {
  const { line, got } = await calling();
  const keys = Array.from({ length: 30_000 }, (_, i) => `"k${i}":0`).join(",");
  line(`{"jsonrpc":"2.0","id":0,"result":{"content":[],"structuredContent":{${keys}}}}`);
  await waitFor(() => got.length > 0);
  const [answer] = got as [{ result: { structuredContent: object } }];
  expect(Object.keys(answer.result.structuredContent)).toHaveLength(30_000);
});

// Its parse (70 ms for 100,000 keys of 150 characters in 16 MiB, on a 2-core machine) and what its
// reader does with it once handed on (a structured result stringified: 50 ms more) ran in one
// turn of the loop, and a ping or cancel waited for both: the loop turns between them now.
test("a long answer's parse and its handing on each take a turn of their own", async () => {
  const loop = new Interleaving();
  onLongParse = () => loop.slice();
  try {
    const { line, got } = await calling(() => loop.slice());
    const keys = Array.from({ length: 30_000 }, (_, i) => `"k${i}":0`).join(",");
    line(`{"jsonrpc":"2.0","id":0,"result":{"content":[],"structuredContent":{${keys}}}}`);
    await waitFor(() => got.length > 0);
    expect(loop.slices).toHaveLength(2);
    expect(loop.unanswered).toBe(0);
  } finally {
    onLongParse = () => {};
  }
});
