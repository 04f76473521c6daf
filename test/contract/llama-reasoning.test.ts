import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { THINK_TEMPLATE as THINK_TEMPLATE_FILE } from "../fixtures/recordings-dir.ts";
import { FORMS, perTest, type RunningStandIn } from "./forms.ts";
import { RECORDINGS } from "./recordings.ts";
import { readExchanges, sseEvents } from "./transcript.ts";

// The stand-in's thinking and structured output, in both forms, each test naming the transcript of
// test/fixtures/llama-server/transcripts it follows (its README: "Reasoning", "Structured output").

type Json = Record<string, any>;

const THINK_TEMPLATE = readFileSync(THINK_TEMPLATE_FILE, "utf8");

for (const form of FORMS) {
  describe(`llama-server stand-in, thinking and structured output (${form.name})`, () => {
    const { start, call } = perTest(form);
    const chat = (s: RunningStandIn, body: Json) =>
      call(s, "/v1/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }),
      });
    const deltas = async (res: Response) =>
      sseEvents(await res.text())
        .filter((e) => e !== "[DONE]")
        .map((e) => (JSON.parse(e) as Json).choices[0])
        .filter((c) => c && c.finish_reason === null && !("role" in c.delta))
        .map((c) => c.delta as Json);

    test("reasoning streams as reasoning_content deltas with no content, then the content (transcript 91)", async () => {
      const s = await start({ script: [{ reasoning: "I think so", content: "Yes." }] });
      const d = await deltas(await chat(s, { stream: true }));
      expect(d).toEqual([
        { reasoning_content: "I" },
        { reasoning_content: " think" },
        { reasoning_content: " so" },
        { content: "Yes." },
      ]);
    });

    test("max_tokens reached while thinking: all reasoning, content empty, finish length (transcripts 91, 91b)", async () => {
      const s = await start({ script: [{ reasoning: "a b c d e f g h i j", content: "late" }] });
      const body = (await (await chat(s, { max_tokens: 4 })).json()) as Json;
      expect(body.choices[0]).toMatchObject({
        finish_reason: "length",
        message: { role: "assistant", content: "", reasoning_content: "a b c d" },
      });
      expect(body.usage.completion_tokens).toBe(4);
    });

    test("enable_thinking false: the template closes the block and the text comes as content (transcript 91c)", async () => {
      const s = await start({ script: [{ reasoning: "plain words" }] });
      const d = await deltas(
        await chat(s, { stream: true, chat_template_kwargs: { enable_thinking: false } }),
      );
      expect(d).toEqual([{ content: "plain" }, { content: " words" }]);
    });

    test("reasoning_budget_tokens ends the think block early and the model answers (transcript 91d)", async () => {
      const s = await start({ script: [{ reasoning: "one two three four five six", content: "vote" }] });
      const d = await deltas(await chat(s, { stream: true, reasoning_budget_tokens: 4 }));
      // Four tokens of budget: three deltas, the fourth the forced end tag.
      expect(d).toEqual([
        { reasoning_content: "one" },
        { reasoning_content: " two" },
        { reasoning_content: " three" },
        { content: "vote" },
      ]);
    });

    test("a history message with reasoning_content null is a 500 from the JSON reader (transcript 91g)", async () => {
      const s = await start();
      const res = await chat(s, {
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "Hello!", reasoning_content: null },
          { role: "user", content: "again" },
        ],
      });
      expect(res.status).toBe(500);
      const body = (await res.json()) as Json;
      expect(body.error.message).toContain("type must be string, but is null");
    });

    test("a thinking template: /props shows it and its caps, an unscripted reply thinks first (transcripts 91, 91h)", async () => {
      const s = await start({ chatTemplate: THINK_TEMPLATE });
      const props = (await (await call(s, "/props")).json()) as Json;
      expect(props.chat_template).toBe(THINK_TEMPLATE);
      expect(props.chat_template_caps.supports_preserve_reasoning).toBe(true);
      const body = (await (await chat(s, {})).json()) as Json;
      expect(body.choices[0].message.reasoning_content).toContain("hi");
      expect(body.choices[0].message.content).toBe("You said: hi");
    });

    test("the default template: no reasoning caps (transcript 04)", async () => {
      const s = await start();
      const props = (await (await call(s, "/props")).json()) as Json;
      expect(props.chat_template_caps).toMatchObject({
        supports_tools: true,
        supports_preserve_reasoning: false,
      });
    });

    test("json_schema: an unscripted reply is the schema's JSON, required fields present (transcript 95)", async () => {
      const s = await start();
      const schema = {
        type: "object",
        properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer" } },
        required: ["name", "age"],
      };
      const body = (await (
        await chat(s, { response_format: { type: "json_schema", json_schema: { name: "p", schema } } })
      ).json()) as Json;
      const value = JSON.parse(body.choices[0].message.content);
      expect(value).toEqual({ name: "x", age: 0 });
    });

    test("json_object: an unscripted reply is an object (transcript 95c)", async () => {
      const s = await start();
      const body = (await (await chat(s, { response_format: { type: "json_object" } })).json()) as Json;
      expect(JSON.parse(body.choices[0].message.content)).toEqual({});
    });

    test("a tool whose schema the converter refuses fails the request and /apply-template alike (transcript 95e)", async () => {
      const s = await start({ script: [{ content: "kept for the next request" }] });
      for (const ex of readExchanges(RECORDINGS, "95e-tool-schema-remote-ref.txt")) {
        const res = await call(s, ex.path, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: ex.requestBody,
        });
        expect(`${ex.path} ${res.status}`).toBe(`${ex.path} ${ex.status}`);
        expect(await res.json()).toEqual(JSON.parse(ex.body));
      }
      const next = (await (await chat(s, {})).json()) as Json;
      expect(next.choices[0].message.content).toBe("kept for the next request");
    });

    test("a schema with a dangling $ref is a 400 naming it, before any generation (transcript 95d)", async () => {
      const s = await start({ script: [{ content: "kept for the next request" }] });
      const res = await chat(s, {
        response_format: {
          type: "json_schema",
          json_schema: { schema: { type: "object", properties: { a: { $ref: "#/nowhere" } } } },
        },
      });
      expect(res.status).toBe(400);
      const body = (await res.json()) as Json;
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain("JSON schema conversion failed");
      expect(body.error.message).toContain("Error resolving ref #/nowhere");
      const next = (await (await chat(s, {})).json()) as Json;
      expect(next.choices[0].message.content).toBe("kept for the next request");
    });
  });
}
