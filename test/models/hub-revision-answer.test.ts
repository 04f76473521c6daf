import { describe, expect, test } from "bun:test";
import { HubBadAnswer, HubClient } from "../../src/models/hub-client.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";

// The revision answer (`GET /api/models/{repo}/revision/{rev}`) lists every file of the repo in
// `siblings`: test/fixtures/hub-stand-in.ts gives its shape ({id, sha, private, gated,
// siblings:[{rfilename}]}, from huggingface_hub's ModelInfo); the real hub adds tags, cardData…
const HUB = "https://hub.example";
const URL_MAIN = `${HUB}/api/models/org/m/revision/main`;
const COMMIT = "c".repeat(40);

const hubAnswering = (body: string | Uint8Array) =>
  new HubClient({
    endpoint: HUB,
    fetch: (async (input: string | URL | Request) =>
      String(input) === URL_MAIN ? new Response(body) : new Response("", { status: 404 })) as typeof fetch,
  });

/** The message of the hub's bad answer that commitOf refuses `body` with. */
async function refusal(body: string): Promise<string> {
  const err = await hubAnswering(body)
    .commitOf("org/m", "main")
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(HubBadAnswer);
  return (err as Error).message;
}

/** A revision answer as the hub gives one, with `files` siblings. */
const answer = (files: number, extra: Record<string, unknown> = {}) => ({
  _id: "65f0c0ffee",
  id: "org/m",
  modelId: "org/m",
  author: "org",
  sha: COMMIT,
  lastModified: "2024-05-01T12:00:00.000Z",
  private: false,
  disabled: false,
  gated: false,
  tags: ["gguf", "text-generation", "en", 'odd "quoted", {tag}'],
  cardData: { license: "apache-2.0", "model-index": [{ name: "m", results: [] }] },
  siblings: Array.from({ length: files }, (_, i) => ({ rfilename: `shards/part-${i}-of-x,[]{}\\".gguf` })),
  spaces: [],
  createdAt: "2024-01-01T00:00:00.000Z",
  ...extra,
});

describe("a large revision answer", () => {
  test("is parsed in pieces, the loop given back between them", async () => {
    // 2.5 MiB of siblings: one JSON.parse of a 44 MiB answer held the loop 373 ms, ping and
    // cancel unanswered during a pull.
    const body = JSON.stringify(answer(50_000));
    expect(body.length).toBeGreaterThan(10 * 256 * 1024);
    const { value, turns } = await turnsDuring(() => hubAnswering(body).commitOf("org/m", "main"));
    expect(value).toBe(COMMIT);
    // The read of the body takes a turn or two; a turn at least for each piece of 256 KiB.
    expect(turns).toBeGreaterThanOrEqual(8);
  });
});

describe("a revision answer the core refuses", () => {
  test("one that is not JSON is the hub's bad answer, big or small, in JSON.parse's words never", async () => {
    const big = JSON.stringify(answer(20_000));
    for (const body of [
      "{",
      '{"sha":"hf_secret_echoed}',
      `${big.slice(0, -1)},}`,
      `${big.slice(0, -1)} hf_secret`,
      `${big} hf_secret`,
      big.replace('"siblings":[', '"siblings":[,'),
      `[${big}]`,
    ])
      expect(await refusal(body)).toBe("the hub's answer is not JSON");
  });

  test("one whose sibling entry is past 1 MiB is refused as the listing's is", async () => {
    const body = JSON.stringify(answer(2, { siblings: [{ rfilename: "a", pad: "x".repeat(1 << 20) }] }));
    expect(await refusal(body)).toBe("the hub's answer for the revision has an entry larger than 1 MiB");
  });

  test("a cancel while a large answer is parsed stops the parse", async () => {
    const body = new TextEncoder().encode(JSON.stringify(answer(20_000)));
    const controller = new AbortController();
    let pulls = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        // The second pull: the body was read whole, the parse begins; cancelled a turn later.
        if (pulls++ === 0) return c.enqueue(body);
        setImmediate(() => controller.abort(new Error("cancelled")));
        c.close();
      },
    });
    const hub = new HubClient({
      endpoint: HUB,
      fetch: (async (_input: string | URL | Request) => new Response(stream)) as typeof fetch,
    });
    const err = await hub.commitOf("org/m", "main", controller.signal).catch((e: unknown) => e);
    expect(pulls).toBe(2);
    expect((err as Error).message).toBe("cancelled");
  });
});
