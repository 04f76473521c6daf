import { describe, expect, test } from "bun:test";
import { ChatHarness, names } from "./harness.ts";

// `response_format` in the turn (docs/agent.md#thinking-and-structured-output): the answer asked
// for under llama-server's grammar (transcripts 95–95d), parsed and validated by the core, failing
// closed.

type Json = Record<string, any>;
const plain = { agents: [{ name: "plain" }] };
const PERSON = {
  type: "object",
  properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer" } },
  required: ["name", "age"],
};
const asPerson = { type: "json_schema", schema: PERSON, name: "person" };

describe("chat: response_format", () => {
  test("json_schema: sent in llama-server's shape, the answer parsed into the result's json (95)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: ['{"name":', '"Ada",', '"age":36}'] });
    const { terminal, events } = await h.chat("j1", { input: "a person", response_format: asPerson });
    expect(terminal.result).toMatchObject({
      response: '{"name":"Ada","age":36}',
      json: { name: "Ada", age: 36 },
      warnings: [],
    });
    expect(names(events)).toContain("final");
    expect(h.llama.requests[0]?.body.response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "person", schema: PERSON },
    });
  });

  test("json_object: any object; the stand-in's grammar writes one when nothing is scripted (95c)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.model.options.unscripted = "echo";
    const { terminal } = await h.chat("o1", {
      input: "json please",
      response_format: { type: "json_object" },
    });
    expect(terminal.result).toMatchObject({ response: "{}", json: {} });
    expect(h.llama.requests[0]?.body.response_format).toEqual({ type: "json_object" });
  });

  test("an answer cut off by max_tokens is output_invalid with the text, errors and finish_reason; no result (95b)", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 2 }] });
    h.llama.script({ content: ['{"name', '":"Ada"', "}"] });
    const { terminal, events } = await h.chat("c1", {
      input: "a person",
      session_id: "s",
      response_format: asPerson,
    });
    expect(terminal).toMatchObject({
      type: "error",
      code: "output_invalid",
      data: { text: '{"name":"Ada"', finish_reason: "length", errors: [{ path: "" }] },
    });
    expect(String(terminal.message)).toContain("cut off by a limit");
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "output_invalid" });
    // Nothing committed; the turn stays resumable.
    expect(h.history("s")).toEqual([]);
    expect(h.checkpoint("s")).toBeDefined();
  });

  test("valid JSON that does not match the schema fails closed, each error with its path", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: '{"name":"far too long a name","age":"old"}' });
    const { terminal } = await h.chat("v1", { input: "a person", response_format: asPerson });
    expect(terminal).toMatchObject({
      type: "error",
      code: "output_invalid",
      data: { finish_reason: "stop" },
    });
    const errors = (terminal.data as Json).errors as Json[];
    expect(errors.map((e) => e.path).sort()).toEqual(["/age", "/name"]);
  });

  test("an answer of many failing items: the first 20 errors listed, errors_total counting all", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: `[${Array(30).fill("1").join(",")}]` });
    const list = { type: "json_schema", schema: { type: "array", items: { type: "string" } } };
    const { terminal } = await h.chat("m1", { input: "words", response_format: list });
    expect(terminal).toMatchObject({ code: "output_invalid", data: { errors_total: 30 } });
    expect((terminal.data as Json).errors).toHaveLength(20);
  });

  test("with tools: the tool steps run free, then the answer is asked for constrained and without tools", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: { text: "Ada" } }] },
      { content: "The name is Ada, 36 years old." },
      { content: '{"name":"Ada","age":36}' },
    );
    const { terminal, events } = await h.chat("t1", { input: "look it up", response_format: asPerson });
    expect(terminal.result).toMatchObject({ json: { name: "Ada", age: 36 } });
    const [first, second, third] = h.llama.requests.map((r) => r.body as Json);
    expect(first?.tools).toBeDefined();
    expect(first?.response_format).toBeUndefined();
    expect(second?.tools).toBeDefined();
    expect(second?.response_format).toBeUndefined();
    expect(third?.tools).toBeUndefined();
    expect(third?.response_format).toMatchObject({ type: "json_schema" });
    // The free answer is not sent back: the constrained step answers the same conversation.
    expect(
      ((third?.messages ?? []) as Json[]).some((m) => m.content === "The name is Ada, 36 years old."),
    ).toBe(false);
    expect(events.find((e) => e.event === "final")).toMatchObject({ step: 2 });
  });

  test("with tools: a free answer on the last allowed step is still asked for under the schema", async () => {
    await using h = new ChatHarness({ app: { data_dir: "./data", max_parse_errors: 2, max_steps: 2 } });
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: { text: "Ada" } }] },
      { content: "The name is Ada, 36 years old." },
      { content: '{"name":"Ada","age":36}' },
    );
    const { terminal, events } = await h.chat("t1", { input: "look it up", response_format: asPerson });
    // Not loop_abort max_steps with the free text as the response and no json.
    expect(terminal.result).toMatchObject({ json: { name: "Ada", age: 36 }, warnings: [] });
    expect(events.find((e) => e.event === "final")).toMatchObject({ step: 2 });
    expect(h.llama.requests).toHaveLength(3);
  });

  test("with tools: a turn at its step limit while still calling tools is asked its answer under the schema", async () => {
    await using h = new ChatHarness({ app: { data_dir: "./data", max_parse_errors: 2, max_steps: 2 } });
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: { text: "Ada" } }] },
      { tool_calls: [{ name: "t__echo", arguments: { text: "again" } }] },
      { content: '{"name":"Ada","age":36}' },
    );
    const { terminal } = await h.chat("t2", { input: "look it up", response_format: asPerson });
    expect(terminal.result).toMatchObject({
      json: { name: "Ada", age: 36 },
      warnings: [{ code: "max_steps", message: expect.stringContaining("step limit of 2") }],
    });
    const last = h.llama.requests.at(-1)?.body;
    expect(last?.response_format).toBeDefined();
    expect(last?.tools ?? []).toEqual([]);
  });

  test("with tools: past max_parse_errors too; an answer that then does not match fails closed", async () => {
    await using h = new ChatHarness({ app: { data_dir: "./data", max_parse_errors: 1, max_steps: 8 } });
    h.llama.script(
      { tool_calls: [{ name: "t__missing", arguments: {} }] },
      { tool_calls: [{ name: "t__missing", arguments: {} }] },
      { content: '{"name":"Ada"}' },
    );
    const { terminal, events } = await h.chat("t3", { input: "look it up", response_format: asPerson });
    expect(terminal).toMatchObject({ type: "error", code: "output_invalid" });
    expect(events.find((e) => e.event === "loop_abort")).toMatchObject({ reason: "output_invalid" });
    expect(h.llama.requests).toHaveLength(3);
    expect(h.llama.requests.at(-1)?.body.response_format).toBeDefined();
  });

  test("without tools every step is constrained: max_steps still bounds unparsed replies, no 'tools stopped' warning", async () => {
    await using h = new ChatHarness({
      ...plain,
      app: { data_dir: "./data", max_parse_errors: 5, max_steps: 2 },
    });
    const bad = { unparsed: "<tool_call>broken" };
    h.llama.script(bad, bad, bad, bad, bad, bad, { content: '{"name":"Ada","age":36}' });
    const { terminal } = await h.chat("n1", { input: "a person", response_format: asPerson });
    // It asked the model past its step limit (6 requests), warning that tools it never had stopped.
    expect(h.llama.requests).toHaveLength(2);
    expect(terminal).toMatchObject({ type: "error", code: "output_invalid" });
    expect(String(terminal.message)).not.toContain("tools stopped");
  });

  test("without tools: max_parse_errors ends the turn at its limit, with no extra constrained step", async () => {
    await using h = new ChatHarness({
      ...plain,
      app: { data_dir: "./data", max_parse_errors: 1, max_steps: 8 },
    });
    const bad = { unparsed: "<tool_call>broken" };
    h.llama.script(bad, bad, { content: '{"name":"Ada","age":36}' });
    const { terminal } = await h.chat("n2", { input: "a person", response_format: asPerson });
    expect(h.llama.requests).toHaveLength(2);
    expect(terminal).toMatchObject({ type: "error", code: "output_invalid" });
  });

  test("with think: reasoning first, then the constrained answer (91i)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ reasoning: "A person has a name.", content: '{"name":"Bo","age":5}' });
    const { terminal } = await h.chat("k1", {
      input: "a person",
      think: { budget_tokens: 16 },
      response_format: asPerson,
    });
    expect(terminal.result).toMatchObject({
      reasoning: "A person has a name.",
      json: { name: "Bo", age: 5 },
    });
    expect(h.llama.requests[0]?.body).toMatchObject({ reasoning_budget_tokens: 16, response_format: {} });
  });

  test("thinking until the limit with a schema fails closed: output_invalid, the answer empty", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 3 }] });
    h.llama.script({ reasoning: "a b c d e", content: "{}" });
    const { terminal } = await h.chat("l1", { input: "a person", response_format: asPerson });
    expect(terminal).toMatchObject({
      code: "output_invalid",
      data: { text: "", finish_reason: "length", errors: [{ path: "", message: "the answer is empty" }] },
    });
  });

  test("thinking until the reply limit with a schema: the error says the model thought, and what to change", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain", max_tokens: 3 }] });
    h.llama.script({ reasoning: "a b c d e", content: "{}" });
    const { terminal } = await h.chat("l2", { input: "a person", response_format: asPerson });
    expect(terminal).toMatchObject({ code: "output_invalid", data: { text: "", finish_reason: "length" } });
    expect(String(terminal.message)).toContain("spent the whole reply limit of 3 tokens thinking");
    expect(String(terminal.message)).toContain("think: {budget_tokens: N}");
  });

  test("a model that stops after thinking, with a schema: the error says so, not only 'empty'", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ reasoning: "a b c", content: [] });
    const { terminal } = await h.chat("l4", { input: "a person", response_format: asPerson });
    expect(terminal).toMatchObject({ code: "output_invalid", data: { text: "", finish_reason: "stop" } });
    expect(String(terminal.message)).toContain("ended its turn after thinking, without an answer");
  });

  test("the context filling up while the answer is written under a schema is not blamed on max_tokens", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ reasoning: "a b c", content: [], finish_reason: "length" });
    const { terminal } = await h.chat("l3", { input: "a person", response_format: asPerson });
    expect(terminal).toMatchObject({ code: "output_invalid", data: { text: "", finish_reason: "length" } });
    expect(String(terminal.message)).not.toContain("max_tokens");
    expect(String(terminal.message)).toContain("model.context");
    expect(String(terminal.message)).toContain("thought until the slot's context");
  });

  test("a schema llama-server refuses is invalid_request naming response_format, the session as it was (95d)", async () => {
    await using h = new ChatHarness(plain);
    // A schema the core's validator takes, refused by the grammar converter with its recorded words.
    h.llama.script({
      error: {
        status: 400,
        message:
          "Unable to generate parser for this template. Automatic parser generation failed: JSON schema conversion failed:\nUnsupported ref: #/x",
      },
    });
    const { terminal } = await h.chat("b1", { input: "x", session_id: "s", response_format: asPerson });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(String(terminal.message)).toContain("JSON schema conversion failed");
    expect(h.checkpoint("s")).toBeUndefined();
    expect(h.history("s")).toEqual([]);
  });

  test("a pattern too large once its counted repeats expand is refused before llama-server is asked", async () => {
    await using h = new ChatHarness(plain);
    // The params check reads a pattern's syntax with each {n} as {1} (the loop's time): whether RE2
    // takes its size is the validator's compile, which must answer before the request, or the
    // grammar converter gets every count expanded and a whole reply is written to be refused.
    const huge = { type: "json_schema", schema: { type: "string", pattern: "a{1000}".repeat(1500) } };
    const { terminal } = await h.chat("p1", { input: "x", session_id: "s", response_format: huge });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(String(terminal.message)).toContain("too large");
    expect(h.llama.requests).toEqual([]);
    expect(h.checkpoint("s")).toBeUndefined();
  });

  test("long patterns are read off the loop: a ping sent after the chat is answered before it", async () => {
    await using h = new ChatHarness(plain);
    h.llama.model.options.unscripted = "echo";
    // Both methods loaded, so each line's params are checked as it is read.
    await h.chat("warm", { input: "x" });
    h.send("p0", "ping");
    await h.terminal("p0");
    // RE2's parse of a schema's worth of Unicode classes held the loop most of a second; one
    // RE2 cannot take (a lookbehind at its end) is refused by the validator's compile instead.
    const pattern = `${"[\\p{L}\\p{N}]".repeat(1000)}(?<=a)`;
    const format = { type: "json_schema", schema: { type: "string", pattern } };
    const before = h.llama.requests.length;
    h.send("long", "chat", { input: "x", session_id: "s", response_format: format });
    h.send("p1", "ping");
    const terminal = await h.terminal("long");
    const order = h.out.filter((m) => m.type !== "event").map((m) => m.id);
    expect(order.indexOf("p1")).toBeLessThan(order.indexOf("long"));
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(String(terminal.message)).toContain("(?<=a)");
    expect(String(terminal.message)).toContain("the pattern at #/pattern cannot be matched in linear time");
    expect(h.llama.requests.length).toBe(before);
    expect(h.checkpoint("s")).toBeUndefined();
  });

  test("a dangling $ref: the validator's refusal, invalid_request naming response_format (95d)", async () => {
    await using h = new ChatHarness(plain);
    h.llama.model.options.unscripted = "echo";
    const schema = { type: "object", properties: { a: { $ref: "#/nowhere" } } };
    const { terminal } = await h.chat("b2", { input: "x", response_format: { type: "json_schema", schema } });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(String(terminal.message)).toMatch(/nowhere/);
  });

  test("a schema the validator cannot compile is refused before the first step: no model step, no tool run", async () => {
    // The stdio helper's run (stand-in): `{"type":"nope"}` passed the params, a free step asked the
    // model and ran its tool call, and only the constrained answer's check refused the schema.
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__echo", arguments: { text: "Ada" } }] },
      { content: "done" },
      { content: "{}" },
    );
    const nope = { type: "json_schema", schema: { type: "nope" } };
    const { terminal, events } = await h.chat("n1", { input: "x", session_id: "s", response_format: nope });
    expect(terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(String(terminal.message)).toContain("the schema cannot be used");
    expect(h.llama.requests).toEqual([]);
    // Refused before the server's lease: no slot held, no model load waited for.
    expect(h.provider.leasedAt).toEqual([]);
    expect(events.some((e) => e.event === "tool_start" || e.event === "llm_start")).toBe(false);
    expect(h.checkpoint("s")).toBeUndefined();
    expect(h.history("s")).toEqual([]);
    // Without tools the one step is the constrained one: not written to be refused either.
    await using p = new ChatHarness(plain);
    const alone = await p.chat("n2", { input: "x", response_format: nope });
    expect(alone.terminal).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(p.llama.requests).toEqual([]);
    expect(p.provider.leasedAt).toEqual([]);
  });

  test("bad formats are refused with the params, before anything starts", async () => {
    await using h = new ChatHarness(plain);
    const big = { type: "object", description: "x".repeat(1024 * 1024) };
    const cycle = {
      $defs: { a: { $ref: "#/$defs/b" }, b: { anyOf: [{ $ref: "#/$defs/a" }] } },
      $ref: "#/$defs/a",
    };
    let deep: Json = { type: "string" };
    for (let i = 0; i < 100; i++) deep = { type: "object", properties: { a: deep } };
    const bad: [unknown, string, RegExp][] = [
      [{ type: "text" }, "response_format.type", /json_schema/],
      [{ type: "xml", schema: {} }, "response_format.type", /json_schema/],
      [{ type: "json_schema" }, "response_format.schema", /required \(record\)/],
      [{ type: "json_schema", schema: [1, 2] }, "response_format.schema", /expected record/],
      [{ type: "json_schema", schema: true }, "response_format.schema", /expected record/],
      [{ type: "json_schema", schema: "{}" }, "response_format.schema", /expected record/],
      [{ type: "json_schema", schema: big }, "response_format.schema", /at most 262144/],
      [{ type: "json_schema", schema: cycle }, "response_format.schema", /\$ref cycle.*#\/\$defs\/a/],
      [{ type: "json_schema", schema: { $ref: "#" } }, "response_format.schema", /\$ref cycle/],
      [{ type: "json_schema", schema: deep }, "response_format.schema", /deeper than 64/],
      ["json", "response_format", /expected object/],
    ];
    for (const [i, [format, field, message]] of bad.entries()) {
      const { terminal, events } = await h.chat(`f${i}`, { input: "x", response_format: format });
      expect(terminal).toMatchObject({ type: "error", code: "invalid_request", data: { field } });
      expect(String(terminal.message)).toMatch(message);
      expect(events).toEqual([]);
    }
    expect(h.llama.requests).toEqual([]);
  });

  test("a recursive schema through properties is not a cycle", async () => {
    await using h = new ChatHarness(plain);
    const tree = {
      $defs: {
        node: { type: "object", properties: { kids: { type: "array", items: { $ref: "#/$defs/node" } } } },
      },
      $ref: "#/$defs/node",
    };
    h.llama.script({ content: '{"kids":[{"kids":[]}]}' });
    const { terminal } = await h.chat("r1", {
      input: "x",
      response_format: { type: "json_schema", schema: tree },
    });
    expect(terminal.result).toMatchObject({ json: { kids: [{ kids: [] }] } });
  });

  test("with resume and regenerate: the format holds for the turn they run", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: '{"name":"A","age":1}' }, { content: '{"name":"B","age":2}' });
    await h.chat("g1", { input: "a person", session_id: "s" });
    const regenerated = await h.chat("g2", { session_id: "s", regenerate: true, response_format: asPerson });
    expect(regenerated.terminal.result).toMatchObject({ json: { name: "B", age: 2 } });
    expect(h.llama.requests[1]?.body.response_format).toMatchObject({ type: "json_schema" });
    expect(h.history("s").map((m) => m.content)).toEqual(["a person", '{"name":"B","age":2}']);

    // An interrupted turn resumed with a format: its answer is constrained and checked.
    h.llama.script({ content: "x", crash_after_chunks: 1 }, { content: '{"name":"C","age":3}' });
    const cut = await h.chat("g3", { input: "another", session_id: "s" });
    expect(cut.terminal.type).toBe("error");
    const resumed = await h.chat("g4", { session_id: "s", resume: true, response_format: asPerson });
    expect(resumed.terminal.result).toMatchObject({ json: { name: "C", age: 3 } });
    h.llama.script({ content: "not json" });
    await h.chat("g5", { input: "more", session_id: "s" });
    h.llama.script({ content: "still not json" });
    const bad = await h.chat("g6", { session_id: "s", regenerate: true, response_format: asPerson });
    expect(bad.terminal).toMatchObject({ code: "output_invalid" });
    // A regenerate that fails closed leaves the old answer in place.
    expect(h.history("s").at(-1)).toEqual({ role: "assistant", content: "not json" });
  });

  test("$ref: # inside items: a recursive answer is a result", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: "[[],[[]]]" });
    const schema = { type: "array", items: { $ref: "#" } };
    const { terminal } = await h.chat("i1", { input: "x", response_format: { type: "json_schema", schema } });
    expect(terminal.result).toMatchObject({ json: [[], [[]]] });
  });

  test("a number beyond a double fails closed (output_invalid naming its path), never null", async () => {
    await using h = new ChatHarness(plain);
    h.llama.script({ content: '{"n": 1e400}' });
    const schema = { type: "object", properties: { n: { type: "number" } } };
    const { terminal } = await h.chat("n1", { input: "x", response_format: { type: "json_schema", schema } });
    expect(terminal).toMatchObject({ code: "output_invalid", data: { errors: [{ path: "/n" }] } });
  });

  test("a schema whose check never ends: ping answers meanwhile; the chat fails closed at the limit", async () => {
    await using h = new ChatHarness(plain);
    // Each level tries both branches: 2^40 checks of a one-character answer.
    const defs: Json = { d40: { type: "number" } };
    for (let i = 0; i < 40; i++)
      defs[`d${i}`] = {
        anyOf: [
          { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { type: "string" }] },
          { $ref: `#/$defs/d${i + 1}` },
        ],
      };
    h.llama.script({ content: "1" });
    h.onEmit = (m) => {
      if (m.event === "llm_done") setTimeout(() => h.send("p1", "ping"), 0);
    };
    const schema = { $defs: defs, $ref: "#/$defs/d0" };
    const { terminal } = await h.chat("x1", { input: "x", response_format: { type: "json_schema", schema } });
    expect(terminal).toMatchObject({ code: "output_invalid", data: { errors: [{ path: "" }] } });
    expect(String(terminal.message)).toContain("longer than 1000 ms");
    const ping = h.out.findIndex((m) => m.id === "p1" && m.type === "result");
    expect(ping).toBeGreaterThanOrEqual(0);
    expect(ping).toBeLessThan(h.out.indexOf(terminal));
    // The thread was ended and another takes the next chat.
    h.llama.script({ content: '{"name":"Ada","age":36}' });
    const next = await h.chat("x2", { input: "x", response_format: asPerson });
    expect(next.terminal.result).toMatchObject({ json: { name: "Ada", age: 36 } });
  });
});
