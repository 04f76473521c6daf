import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { FORMS, type RunningStandIn } from "./forms.ts";
import { CASES, filledContext, isChat, isStream, N_CTX, RECORDINGS, turnOf } from "./recordings.ts";
import { chunkKind, readTranscript, shape, sseEvents, type Transcript } from "./transcript.ts";

// The recorded request bodies of test/fixtures/llama-server replayed against the stand-in, whose
// answers must have the recorded shape: status, the headers that matter, SSE framing and the fields
// of every kind of event, error bodies. The "model" output is taken from the recording itself (its
// tokens, its tool calls), so the comparison is about llama-server, not the model. The same
// exchanges through the client are test/llama/completion.test.ts.

type Json = Record<string, any>;

/** The request as curl made it. */
function replay(s: RunningStandIn, t: Transcript): Promise<Response> {
  const headers: Record<string, string> = {};
  if (t.contentType) headers["Content-Type"] = t.contentType;
  return fetch(`${s.baseUrl}${t.path}`, {
    method: t.method,
    headers,
    body: t.method === "GET" || t.method === "DELETE" ? undefined : t.requestBody,
  });
}

/** What a streamed reply says, for comparing the stand-in's with the recording's. */
function readStream(body: string) {
  const events = sseEvents(body);
  const kinds = events.map(chunkKind);
  const chunks = events.filter((e) => e !== "[DONE]").map((e) => JSON.parse(e) as Json);
  const byKind = new Map<string, unknown>();
  events.forEach((e, i) => {
    const kind = kinds[i] as string;
    if (!byKind.has(kind)) byKind.set(kind, e === "[DONE]" ? e : shape(JSON.parse(e)));
  });
  const deltas = chunks.map((c) => c.choices[0]?.delta ?? {});
  return {
    /** The kinds in order, runs of one kind collapsed: role, content…, finish, usage, done. */
    pattern: kinds.filter((k, i) => k !== kinds[i - 1]),
    byKind: Object.fromEntries(byKind),
    content: deltas.filter((d) => typeof d.content === "string").map((d) => d.content as string),
    toolCalls: deltas.flatMap((d) => d.tool_calls ?? []) as Json[],
    finish: chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason,
    last: chunks.at(-1) as Json,
  };
}

function expectSameResponse(t: Transcript, status: number, headers: Headers, body: string): void {
  expect(status).toBe(t.status);
  expect(headers.get("content-type")).toBe(t.headers["content-type"] as string);
  expect(headers.get("server")).toBe(t.headers.server as string);
  if (isStream(t)) {
    expect(headers.get("x-accel-buffering")).toBe(t.headers["x-accel-buffering"] as string);
    const recorded = readStream(t.body);
    const got = readStream(body); // throws on any framing but `data: <json>\n\n`
    expect(got.pattern).toEqual(recorded.pattern);
    expect(got.byKind).toEqual(recorded.byKind);
    expect(got.finish).toBe(recorded.finish);
    if (filledContext(t)) {
      // Timings ride on the last chunk, with usage or without (11, 12).
      const { cache_n, prompt_n, predicted_n } = got.last.timings;
      expect(cache_n + prompt_n + predicted_n).toBe(N_CTX);
    } else expect(got.content).toEqual(recorded.content);
    const args = (calls: Json[]) => calls.map((c) => c.function.arguments).join("");
    expect(args(got.toolCalls)).toBe(args(recorded.toolCalls));
    expect(got.toolCalls[0]?.id).toBe(recorded.toolCalls[0]?.id);
    return;
  }
  const recorded = JSON.parse(t.body) as Json;
  const got = JSON.parse(body) as Json;
  expect(shape(got)).toEqual(shape(recorded));
  if (recorded.error) {
    expect(got.error.type).toBe(recorded.error.type);
    expect(got.error.code).toBe(recorded.error.code);
    if (recorded.error.n_ctx !== undefined) {
      expect(got.error.n_ctx).toBe(recorded.error.n_ctx);
      expect(got.error.n_prompt_tokens).toBeGreaterThan(got.error.n_ctx);
    }
  }
  if (recorded.choices) {
    expect(got.choices[0].finish_reason).toBe(recorded.choices[0].finish_reason);
    if (filledContext(t)) expect(got.usage.total_tokens).toBe(N_CTX);
    else expect(got.choices[0].message).toEqual(recorded.choices[0].message);
  }
}

describe("recorded llama-server exchanges replayed against the stand-in", () => {
  const transcripts = CASES.map((file) => readTranscript(RECORDINGS, file));
  // Turns in request order: only the requests that reach generation consume one.
  const script = transcripts.filter((t) => isChat(t) && t.status === 200).map(turnOf);

  for (const form of FORMS) {
    describe(form.name, () => {
      let s: RunningStandIn;
      beforeAll(async () => {
        s = await form.start({ open: true, nCtx: N_CTX, script });
      });
      afterAll(() => s.stop());

      for (const t of transcripts) {
        test(`${t.file}: ${t.method} ${t.path}${t.bodyFile ? ` with ${t.bodyFile}` : ""} → ${t.status}`, async () => {
          const res = await replay(s, t);
          expectSameResponse(t, res.status, res.headers, await res.text());
        });
      }
    });
  }
});
