import { expect, test } from "bun:test";
import { ChatHarness } from "./harness.ts";

const PERSON = { type: "object", properties: { age: { type: "integer" } }, required: ["age"] };

// llama-server's own API takes `{type: "json_object", schema}` and constrains the answer by that
// schema (its OpenAI-compatible parser reads `schema` there); the core stripped the key, so a host
// written against llama-server asked for a person and got any JSON object back as `json`, valid
// by nothing it asked for. The wrapper's keys are now strict; the JSON Schema itself stays open.
test("a response_format key the core does not know is refused before anything is sent", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }] });
  const { terminal } = await h.chat("r1", {
    input: "a person",
    response_format: { type: "json_object", schema: PERSON },
  });
  expect(terminal).toMatchObject({
    type: "error",
    code: "invalid_request",
    message: "params.response_format.schema: unknown key",
    data: { field: "response_format.schema" },
  });
  expect(h.llama.requests).toHaveLength(0);
  // The schema's own keywords are not the core's to know: one it has never heard of still passes.
  const open = { ...PERSON, "x-vendor": { anything: true }, $comment: "kept" };
  h.llama.script({ content: ['{"age":36}'] });
  const ok = await h.chat("r2", {
    input: "a person",
    response_format: { type: "json_schema", schema: open },
  });
  expect(ok.terminal.result).toMatchObject({ json: { age: 36 } });
});
