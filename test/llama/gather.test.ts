import { afterEach, describe, expect, test } from "bun:test";
import { streamCompletion } from "../../src/llama/completion.ts";
import { type BodyReader, postStream } from "../../src/llama/stream-socket.ts";
import { clientReads, closeScripted, scripted, stepped } from "./scripted-server.ts";

// Joined pieces (docs/performance.md, "Joined pieces"): once deltas are handed on the answer
// rests unread for `gatherMs`, and what came meanwhile goes on as one; a delta after a quiet
// spell goes at once, the reply's end waits at most the window, a cancel not at all.
afterEach(closeScripted);

const HEAD = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
const event = (data: unknown) => chunk(`data: ${JSON.stringify(data)}\n\n`);
const content = (text: string) => event({ choices: [{ delta: { content: text } }] });
const reasoning = (text: string) => event({ choices: [{ delta: { reasoning_content: text } }] });
const FINISH = `${event({ choices: [{ delta: {}, finish_reason: "stop" }] })}${chunk("data: [DONE]\n\n")}0\r\n\r\n`;

/** A server answering `writes` `gapMs` apart (scripted-server.ts); its URL. */
const timed = async (writes: string[], gapMs: number, end = true) =>
  (await scripted(writes, { gapMs, end })).baseUrl;

/** Each delta handed on, with when (ms after the request). */
async function stream(baseUrl: string, gatherMs: number, signal = new AbortController().signal) {
  const t0 = performance.now();
  const deltas: { text: string; at: number }[] = [];
  const thoughts: { text: string; at: number }[] = [];
  const result = await streamCompletion(
    { baseUrl, apiKey: "k" },
    { messages: [] },
    {
      signal,
      gatherMs,
      onDelta: (text) => deltas.push({ text, at: performance.now() - t0 }),
      onReasoning: (text) => thoughts.push({ text, at: performance.now() - t0 }),
    },
  );
  return { result, deltas, thoughts, ms: performance.now() - t0 };
}

/**
 * A stream with a 100 ms window from a server the test writes (scripted-server.ts `stepped`),
 * once the head and `first` were read: its window then holds the socket unread.
 */
async function steppedStream(first: string) {
  const server = await stepped();
  const reads = clientReads();
  const read = reads.next();
  const streamed = stream(server.baseUrl, 100);
  await server.write(`${HEAD}${first}`);
  await read;
  return { server, reads, streamed, [Symbol.dispose]: () => reads[Symbol.dispose]() };
}

const WORDS = Array.from({ length: 12 }, (_, i) => `w${i} `);

describe("joined pieces", () => {
  test("0: each delta on its own, as before", async () => {
    const url = await timed([HEAD, ...WORDS.map(content), FINISH], 1);
    const { deltas, result } = await stream(url, 0);
    expect(deltas.map((d) => d.text)).toEqual(WORDS);
    expect(result.content).toBe(WORDS.join(""));
  });

  test("deltas 5 ms apart with a 50 ms window: the first at once, then one line a window, nothing lost or reordered", async () => {
    const words = Array.from({ length: 60 }, (_, i) => `w${i} `);
    const url = await timed([HEAD, ...words.map(content), FINISH], 5);
    const { deltas, result, ms } = await stream(url, 50);
    expect(deltas.map((d) => d.text).join("")).toBe(words.join(""));
    expect(result.content).toBe(words.join(""));
    expect(deltas[0]?.text).toBe("w0 ");
    expect(deltas.length).toBeGreaterThanOrEqual(3);
    expect(deltas.length).toBeLessThanOrEqual(Math.ceil(ms / 50) + 2);
    // Every line but the last (which the reply's end lets go) a window after the one before.
    for (let i = 1; i < deltas.length - 1; i++)
      expect((deltas[i]?.at ?? 0) - (deltas[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(48);
  });

  test("a reply that ends inside the window goes on at the window's end, joined", async () => {
    const url = await timed([HEAD, ...WORDS.map(content), FINISH], 2);
    const { deltas, ms } = await stream(url, 300);
    expect(deltas.map((d) => d.text)).toEqual(["w0 ", WORDS.slice(1).join("")]);
    expect(deltas[1]?.at).toBeGreaterThanOrEqual(295);
    expect(ms).toBeLessThan(1_500);
  });

  test("after a quiet spell longer than the window, a delta goes at once", async () => {
    // b comes 150 ms after a, past a 100 ms window, and c once b was read: b went on alone, at
    // once (its own window then holds c). Held for a window, b would be joined with c. Timing the
    // gap (under 390 ms, 400 if held) failed on a loaded box.
    using t = await steppedStream(content("a"));
    await Bun.sleep(150); // the quiet spell: a's window (100 ms) ends before it
    const second = t.reads.next();
    await t.server.write(content("b"));
    await second;
    await t.server.write(`${content("c")}${FINISH}`);
    t.server.end();
    const { deltas } = await t.streamed;
    expect(deltas.map((d) => d.text)).toEqual(["a", "b", "c"]);
  });

  test("reasoning and content of one window: each joined, thinking first", async () => {
    // All after r0 written while r0's window holds the socket unread: 4 ms gaps from a timed
    // server let r0 and r1 come in one read on a loaded box.
    using t = await steppedStream(reasoning("r0"));
    for (const piece of [reasoning("r1"), reasoning("r2"), content("c0"), content("c1"), FINISH])
      void t.server.write(piece);
    t.server.end();
    const { deltas, thoughts, result } = await t.streamed;
    expect(thoughts.map((d) => d.text)).toEqual(["r0", "r1r2"]);
    expect(deltas.map((d) => d.text)).toEqual(["c0c1"]);
    expect((thoughts[1]?.at ?? Number.POSITIVE_INFINITY) <= (deltas[0]?.at ?? 0)).toBe(true);
    expect(result.reasoning).toBe("r0r1r2");
  });

  test("a cancel during the window is thrown at once, not when the window ends", async () => {
    const url = await timed([HEAD, content("a"), content("b"), ...Array(200).fill("")], 10, false);
    const abort = new AbortController();
    const reason = new Error("cancelled");
    const t0 = performance.now();
    const run = stream(url, 5_000, abort.signal);
    await Bun.sleep(80);
    abort.abort(reason);
    expect(await run.catch((e) => e)).toBe(reason);
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});

describe("the reader's rest", () => {
  const open = (url: string) =>
    postStream({ baseUrl: url, apiKey: "k" }, "/x", "{}", new AbortController().signal);

  test("what arrives while it rests is read after it, in one piece", async () => {
    // b, c and d are written once it rests, before its timer can end it: timed gaps let b come
    // before the rest on a loaded box, and read alone.
    const s = await stepped();
    const opened = open(s.baseUrl);
    await s.write(`${HEAD}${chunk("a")}`);
    const reader = await opened;
    expect(await reader.read()).toBe("a");
    const t0 = performance.now();
    reader.rest(60);
    const sent = Promise.all([s.write(chunk("b")), s.write(chunk("c")), s.write(chunk("d"))]);
    expect(await reader.read()).toBe("bcd");
    expect(performance.now() - t0).toBeGreaterThanOrEqual(55);
    await sent;
    await s.write("0\r\n\r\n");
    s.end();
    expect(await all(reader)).toBe("");
  });

  test("an abort while it rests rejects the read at once", async () => {
    const url = await timed([HEAD, chunk("a"), chunk("b"), ...Array(100).fill("")], 10, false);
    const abort = new AbortController();
    const reader = await postStream({ baseUrl: url, apiKey: "k" }, "/x", "{}", abort.signal);
    expect(await reader.read()).toBe("a");
    reader.rest(5_000);
    const t0 = performance.now();
    setTimeout(() => abort.abort(new Error("stop")), 30);
    expect(((await reader.read().catch((e) => e)) as Error).message).toBe("stop");
    expect(performance.now() - t0).toBeLessThan(1_000);
  });
});

async function all(reader: BodyReader): Promise<string> {
  let text = "";
  for (let t = await reader.read(); t !== undefined; t = await reader.read()) text += t;
  return text;
}
