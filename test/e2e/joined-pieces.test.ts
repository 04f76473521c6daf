import { describe, expect, test } from "bun:test";
import { spawnCore } from "../fixtures/core-process.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Joined pieces through the compiled binary (docs/protocol.md#joined-pieces): the stand-in
// streams 200 word tokens 1 ms apart, faster than the default 5 ms window, with 50 ms after the
// first (a core descheduled for a millisecond under load would otherwise read two at once).
const onPosix = process.platform !== "win32";
const WORDS = Array.from({ length: 200 }, (_, i) => `w${i} `);

async function chunksOf(app: string[]): Promise<{ deltas: string[]; response: string }> {
  await using dir = tmpdir();
  const stack = writeStack(dir.path, {
    tools: [],
    app,
    script: [{ content: WORDS, chunk_delay_ms: 1, first_gap_ms: 50 }],
  });
  await using core = spawnCore({ cwd: dir.path, env: stack.env });
  const r = await core.request({ id: 1, method: "chat", params: { input: "go" } }, 30_000);
  expect(r.type).toBe("result");
  const deltas = core.messages
    .filter((m) => m.id === 1 && m.event === "llm_chunk")
    .map((m) => m.delta as string);
  return { deltas, response: r.result.response };
}

describe.skipIf(!onPosix)("joined pieces through the compiled binary", () => {
  test("by default a fast stream comes in fewer lines, the first on its own, the text whole", async () => {
    const { deltas, response } = await chunksOf([]);
    expect(response).toBe(WORDS.join(""));
    expect(deltas.join("")).toBe(response);
    expect(deltas[0]).toBe("w0 ");
    // 200 tokens ~1 ms apart in 5 ms windows: a few tokens a line, never one a line.
    expect(deltas.length).toBeLessThan(WORDS.length / 2);
  }, 30_000);

  test("stream_gather_ms 0: a line per token, as llama-server sent them", async () => {
    const { deltas, response } = await chunksOf(["stream_gather_ms: 0"]);
    expect(response).toBe(WORDS.join(""));
    expect(deltas).toEqual(WORDS);
  }, 30_000);
});
