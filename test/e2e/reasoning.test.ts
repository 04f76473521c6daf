import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Msg, spawnCore } from "../fixtures/core-process.ts";
import { THINK_TEMPLATE } from "../fixtures/recordings-dir.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 21 from the compiled binary against the stand-in: a thinking template given through
// llama.extra_args (as chatml_think.jinja, transcripts 91–91h), and response_format (95–95d).

const events = (ms: Msg[], id: unknown) => ms.filter((m) => m.id === id && m.type === "event");

const thinkTemplate = (): string => readFileSync(THINK_TEMPLATE, "utf8");

/** The stack's config with lines added under `llama:`. */
function underLlama(dir: string, lines: string[]): void {
  const file = join(dir, "config.yaml");
  writeFileSync(file, readFileSync(file, "utf8").replace("llama:\n", `llama:\n${lines.join("\n")}\n`));
}

describe.skipIf(process.platform === "win32")("reasoning and structured output (compiled core)", () => {
  test("a thinking template via llama.extra_args: plan and status say so, the chat streams llm_reasoning and stores it", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const template = join(dir.path, "think.jinja");
    writeFileSync(template, thinkTemplate());
    underLlama(dir.path, ["  extra_args: [--chat-template-file, think.jinja]"]);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const init = await core.request({ id: 0, method: "initialize" });
    expect(init.result.capabilities.events).toContain("llm_reasoning");

    const plan = (await core.request({ id: "p", method: "plan" })).result;
    expect(plan.plan.chat_template).toMatchObject({ source: "file", thinking: true });
    expect(plan.plan.argv).toContain("--chat-template-file");
    expect((await core.request({ id: "s0", method: "status" })).result.llama.thinking).toBeNull();

    const chat = await core.request(
      { id: "c", method: "chat", params: { input: "hi", session_id: "s" } },
      30_000,
    );
    expect(chat.type).toBe("result");
    const evs = events(core.messages, "c");
    const thought = evs.filter((e) => e.event === "llm_reasoning");
    expect(thought.length).toBeGreaterThan(0);
    const firstChunk = evs.findIndex((e) => e.event === "llm_chunk");
    expect(evs.indexOf(thought.at(-1) as Msg)).toBeLessThan(firstChunk);
    expect(chat.result.response).toBe("You said: hi");
    expect(chat.result.reasoning).toBe(thought.map((e) => e.delta).join(""));
    expect(chat.result.reasoning).toContain('"hi"');

    // /props has been read by the chat: status says what the server says.
    const status = (await core.request({ id: "s1", method: "status" })).result;
    expect(status.llama).toMatchObject({ state: "ready", thinking: true });
    const got = (await core.request({ id: "g", method: "sessions.get", params: { session_id: "s" } })).result;
    expect(got.messages[1]).toMatchObject({ role: "assistant", reasoning: chat.result.reasoning });

    // think false closes the block: the next request says so, and its text is content.
    const off = await core.request(
      { id: "c2", method: "chat", params: { input: "again", session_id: "s", think: false } },
      30_000,
    );
    expect(off.result.reasoning).toBe("");
    const sent = stack.llamaRequests().at(-1) as Record<string, unknown>;
    expect(sent.chat_template_kwargs).toEqual({ enable_thinking: false });
    // The earlier answer's thinking is not sent back in a later turn.
    expect(JSON.stringify(sent.messages)).not.toContain("reasoning_content");
  }, 60_000);

  test("response_format: the answer's json, output_invalid for a cut one, invalid_request for a bad schema", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      tools: [],
      script: [{ content: '{"name":"Ada","age":36}' }, { content: '{"name":', finish_reason: "length" }],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const schema = {
      type: "object",
      properties: { name: { type: "string" }, age: { type: "integer" } },
      required: ["name", "age"],
    };
    const format = { type: "json_schema", schema };
    const ok = await core.request(
      { id: "j", method: "chat", params: { input: "a person", response_format: format } },
      30_000,
    );
    expect(ok.result).toMatchObject({ json: { name: "Ada", age: 36 }, reasoning: "" });
    expect(stack.llamaRequests()[0]).toMatchObject({
      response_format: { type: "json_schema", json_schema: { schema } },
    });

    const cut = await core.request(
      { id: "x", method: "chat", params: { input: "a person", response_format: format } },
      30_000,
    );
    expect(cut).toMatchObject({
      type: "error",
      code: "output_invalid",
      data: { text: '{"name":', finish_reason: "length" },
    });
    expect(events(core.messages, "x").at(-1)).toMatchObject({
      event: "loop_abort",
      reason: "output_invalid",
    });

    const cycle = await core.request({
      id: "b",
      method: "chat",
      params: { input: "x", response_format: { type: "json_schema", schema: { $ref: "#" } } },
    });
    expect(cycle).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format.schema" },
    });
    // A schema only the validator's worker refuses: in the binary too, before any request.
    const asked = stack.llamaRequests().length;
    const nope = await core.request(
      {
        id: "n",
        method: "chat",
        params: { input: "x", response_format: { type: "json_schema", schema: { type: "nope" } } },
      },
      30_000,
    );
    expect(nope).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { field: "response_format" },
    });
    expect(String(nope.message)).toContain("the schema cannot be used");
    expect(stack.llamaRequests()).toHaveLength(asked);
    const think = await core.request({ id: "t", method: "chat", params: { input: "x", think: "max" } });
    expect(think).toMatchObject({ type: "error", code: "invalid_request", data: { field: "think" } });
  }, 60_000);
});
