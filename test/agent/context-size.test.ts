import { expect, test } from "bun:test";
import { Launch } from "../../src/runtime/launch.ts";

// A launch's n_ctx never changes: GET /props is asked once per launch, not on every chat.

test("a Launch reads /props once, a new launch again, and not a failure; it keeps what it said of thinking", async () => {
  let props = 0;
  let answer = 200;
  using server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => {
      props++;
      return Response.json(
        {
          default_generation_settings: { n_ctx: 2048 },
          chat_template_caps: { supports_preserve_reasoning: true },
        },
        { status: answer },
      );
    },
  });
  const launch = () => new Launch({ baseUrl: `http://127.0.0.1:${server.port}`, apiKey: "k", slots: 1 });
  const signal = new AbortController().signal;
  const first = launch();
  expect(first.thinking).toBeUndefined();
  expect(await first.contextSize(signal)).toBe(2048);
  expect(await first.contextSize(signal)).toBe(2048);
  expect(props).toBe(1);
  expect(first.thinking).toBe(true);
  expect(await launch().contextSize(signal)).toBe(2048);
  expect(props).toBe(2);
  answer = 503;
  const sleepy = launch();
  expect(await sleepy.contextSize(signal)).toBeUndefined();
  answer = 200;
  expect(await sleepy.contextSize(signal)).toBe(2048);
  expect(props).toBe(4);
});

test("chats on one launch read /props once: the turn asks its lease's Launch", async () => {
  const { ChatHarness } = await import("./harness.ts");
  await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
  h.llama.script({ content: "one" }, { content: "two" }, { content: "three" });
  for (const id of ["c1", "c2", "c3"]) {
    const { terminal } = await h.chat(id, { input: "hi" });
    expect(terminal.type).toBe("result");
  }
  expect(h.llama.model.propsReads).toBe(1);
});
