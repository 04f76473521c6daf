import { describe, expect, test } from "bun:test";
import { LlmError } from "../../src/llama/errors.ts";
import { ANSWER_BYTES } from "../../src/llama/http.ts";
import { isSleeping, parseProps, readProps } from "../../src/llama/props.ts";
import { Launch } from "../../src/runtime/launch.ts";
import { RECORDINGS } from "../contract/recordings.ts";
import { readTranscript } from "../contract/transcript.ts";
import { endlessAnswer } from "./endless-answer.ts";
import { TAPE_KEY, tape } from "./tape.ts";

// GET /props as recorded (04: tools template, 4 slots; 91h: a thinking template, 1 slot) and
// what idle sleep changes in it (86: is_sleeping only).

const body = (file: string) => JSON.parse(readTranscript(RECORDINGS, file).body) as Record<string, unknown>;

describe("the recorded /props", () => {
  test("04-props.txt: n_ctx per slot, the slots, awake, the template's tool caps, no vision", () => {
    const p = parseProps(body("04-props.txt"));
    expect(p).toMatchObject({
      n_ctx: 2048,
      total_slots: 4,
      is_sleeping: false,
      modalities: { vision: false, audio: false },
      build_info: "b10587-3f545becc",
    });
    expect(p.chat_template_caps).toMatchObject({ supports_tools: true, supports_preserve_reasoning: false });
    // Read from the template's text: a tools template that does not think.
    expect(p.thinking).toBe(false);
    // The template itself (kilobytes) is not kept: its hash is, for the KV state's fingerprint.
    expect(JSON.stringify(p).length).toBeLessThan(1000);
    expect(p.chat_template_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(parseProps(body("91h-props-thinking-template.txt")).chat_template_hash).not.toBe(
      p.chat_template_hash,
    );
    expect(p.model_path).toBe("models/tiny-llama.gguf");
  });

  test("91h-props-thinking-template.txt: a thinking template preserves reasoning and has no tools", () => {
    const p = parseProps(body("91h-props-thinking-template.txt"));
    expect(p.total_slots).toBe(1);
    expect(p.chat_template_caps).toMatchObject({ supports_preserve_reasoning: true, supports_tools: false });
    expect(p.thinking).toBe(true);
    // Its text alone says so too (the caps aside): it opens <think>.
    const { chat_template_caps: _caps, ...textOnly } = body("91h-props-thinking-template.txt");
    expect(parseProps(textOnly).thinking).toBe(true);
  });

  test("86-sleep-props.txt: is_sleeping is read as it changes, against a server playing 04 back", async () => {
    const awake = readTranscript(RECORDINGS, "04-props.txt");
    const asleep = { ...awake, body: awake.body.replace('"is_sleeping":false', '"is_sleeping":true') };
    using t = tape(awake, asleep);
    expect(await isSleeping(t)).toBe(false);
    expect(await isSleeping(t)).toBe(true);
    expect(t.asked.map((a) => [a.path, a.authorization])).toEqual([
      ["/props", `Bearer ${TAPE_KEY}`],
      ["/props", `Bearer ${TAPE_KEY}`],
    ]);
  });

  test("04-props.txt: a Launch's contextSize asks once per launch, again for a new launch", async () => {
    using t = tape(readTranscript(RECORDINGS, "04-props.txt"));
    const signal = new AbortController().signal;
    const endpoint = { baseUrl: t.baseUrl, apiKey: t.apiKey, slots: 1 };
    const launch = new Launch(endpoint);
    expect(await launch.contextSize(signal)).toBe(2048);
    expect(await launch.contextSize(signal)).toBe(2048);
    expect(t.asked.length).toBe(1);
    expect(await new Launch(endpoint).contextSize(signal)).toBe(2048);
    expect(t.asked.length).toBe(2);
  });
});

describe("a /props of another shape", () => {
  test("each field stands alone: a wrong one is null, the others count", () => {
    const p = parseProps({
      default_generation_settings: { n_ctx: "2048" },
      is_sleeping: true,
      total_slots: 0,
    });
    expect(p).toEqual({
      n_ctx: null,
      total_slots: null,
      is_sleeping: true,
      chat_template_caps: null,
      modalities: null,
      build_info: null,
      thinking: null,
      model_path: null,
      chat_template_hash: null,
      markers: [],
    });
    expect(() => parseProps("props")).toThrow(LlmError);
  });

  // llama.cpp's n_ctx is a uint32_t: a fraction or 1e300 is a lie, and the turn took it as its
  // slot (every history "fits", the reply's and the empty events' bounds scale from it); null
  // falls back to the configured context (agent/turn/turn.ts).
  test("an n_ctx no llama-server can have (a fraction, past 2^32) is null, not the slot's context", () => {
    for (const n_ctx of [2048.5, 1e300, 2 ** 32])
      expect(parseProps({ default_generation_settings: { n_ctx } }).n_ctx).toBeNull();
    expect(parseProps({ default_generation_settings: { n_ctx: 2 ** 32 - 1 } }).n_ctx).toBe(2 ** 32 - 1);
  });

  // The recorded 04 with its n_ctx a fraction: the parse keeps every other field, but the Launch
  // gave the turn no /props at all, so the template's markers went unbroken (a document could
  // spell a turn of its own: docs/agent.md "Special-token text") and a text model took images.
  test("a Launch whose /props has no usable n_ctx still gives its other fields, asked again next time", async () => {
    const recorded = body("04-props.txt");
    const settings = recorded.default_generation_settings as Record<string, unknown>;
    const odd = { ...recorded, default_generation_settings: { ...settings, n_ctx: 2048.5 } };
    using t = tape({ status: 200, headers: {}, body: JSON.stringify(odd) });
    const launch = new Launch({ baseUrl: t.baseUrl, apiKey: t.apiKey, slots: 1 });
    const signal = new AbortController().signal;
    const props = await launch.props(signal);
    expect(props?.n_ctx).toBeNull();
    expect(props?.modalities?.vision).toBe(false);
    expect(props?.markers).toEqual(parseProps(recorded).markers);
    expect(props?.markers.length).toBeGreaterThan(0);
    expect(await launch.contextSize(signal)).toBeUndefined();
    expect(t.asked.length).toBe(2);
  });

  test("an error status or no answer: readProps throws, isSleeping and a Launch's contextSize do not", async () => {
    using t = tape({
      status: 401,
      headers: {},
      body: '{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}',
    });
    const err = await readProps(t, { timeoutMs: 1000 }).catch((e) => e);
    expect(err).toMatchObject({ kind: "bad_response", status: 401 });
    expect(await isSleeping(t)).toBeNull();
    const launch = new Launch({ baseUrl: t.baseUrl, apiKey: t.apiKey, slots: 1 });
    expect(await launch.contextSize(new AbortController().signal)).toBeUndefined();
  });
});

// An answer read whole before it is parsed (http.ts answerText) was read to its end however long:
// a broken server (or another program on the port) whose /props never ends filled the core's
// memory at loopback speed within the 5 s the read is given.
describe("an answer that never ends", () => {
  test("is refused at its limit as bad_response, not read into memory until the deadline", async () => {
    const MiB = new Uint8Array(1024 * 1024).fill(0x20);
    using server = endlessAnswer(() => MiB);
    const err = await readProps(server, { timeoutMs: 60_000 }).catch((e) => e);
    expect(err).toBeInstanceOf(LlmError);
    expect((err as LlmError).kind).toBe("bad_response");
    expect((err as LlmError).message).toContain(`over ${ANSWER_BYTES.most} bytes`);
    expect(server.pieces() * MiB.length).toBeLessThan(ANSWER_BYTES.most * 2);
  });
});
