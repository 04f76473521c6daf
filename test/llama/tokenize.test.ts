import { describe, expect, test } from "bun:test";
import { awaitModel, tokenize } from "../../src/llama/tokenize.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readTranscript } from "../contract/transcript.ts";
import { endlessBody, tape } from "./tape.ts";

describe("POST /tokenize", () => {
  test("30b-tokenize-plain.txt: the ids; 30-tokenize.txt: the ids of tokens sent with their pieces", async () => {
    using plain = tape(readTranscript(RECORDINGS, "30b-tokenize-plain.txt"));
    expect(await tokenize(plain, "Hello world!")).toEqual([10994, 3186, 29991]);
    expect(JSON.parse(plain.asked[0]?.body ?? "")).toEqual({ content: "Hello world!" });
    using pieces = tape(readTranscript(RECORDINGS, "30-tokenize.txt"));
    expect((await tokenize(pieces, "x")).slice(0, 2)).toEqual([1, 10994]);
  });

  test("awaitModel (85-sleep-idle-chat.txt: the request a sleeping server reloads for) resolves on any answer", async () => {
    using t = tape({ status: 500, headers: {}, body: "{}" });
    await awaitModel(t, new AbortController().signal);
    expect(t.asked[0]).toMatchObject({ method: "POST", path: "/tokenize", body: '{"content":""}' });
  });

  // Its answer was read whole to drop it: an endless one filled memory (see statusOf).
  test("awaitModel: an answer that never ends is read no further than its bound", async () => {
    using server = endlessBody(500);
    await awaitModel(server, new AbortController().signal);
    expect(server.sent()).toBeLessThan(64 * 1024 * 1024);
  });
});
