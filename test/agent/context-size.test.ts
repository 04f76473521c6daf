import { expect, test } from "bun:test";
import { contextSizeOf } from "../../src/llama/props.ts";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";

// A launch's n_ctx never changes: GET /props is asked once per launch, not on every chat.

test("contextSizeOf reads /props once per launch, again for a new launch, and not a failure", async () => {
  let props = 0;
  let answer = 200;
  using server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => {
      props++;
      return Response.json({ default_generation_settings: { n_ctx: 2048 } }, { status: answer });
    },
  });
  const launch = (died = new AbortController().signal): LlamaLease => ({
    baseUrl: `http://127.0.0.1:${server.port}`,
    apiKey: "k",
    release: () => {},
    reportFailure: () => {},
    died,
    requestTimeoutMs: 1000,
  });
  const signal = new AbortController().signal;
  const first = new AbortController().signal;
  expect(await contextSizeOf(launch(first), signal)).toBe(2048);
  expect(await contextSizeOf(launch(first), signal)).toBe(2048);
  expect(props).toBe(1);
  expect(await contextSizeOf(launch(), signal)).toBe(2048);
  expect(props).toBe(2);
  answer = 503;
  const sleepy = new AbortController().signal;
  expect(await contextSizeOf(launch(sleepy), signal)).toBeUndefined();
  answer = 200;
  expect(await contextSizeOf(launch(sleepy), signal)).toBe(2048);
  expect(props).toBe(4);
});

test("chats on one launch read /props once: the turn asks through contextSizeOf", async () => {
  const { ChatHarness } = await import("./harness.ts");
  await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
  h.llama.script({ content: "one" }, { content: "two" }, { content: "three" });
  for (const id of ["c1", "c2", "c3"]) {
    const { terminal } = await h.chat(id, { input: "hi" });
    expect(terminal.type).toBe("result");
  }
  expect(h.llama.model.propsReads).toBe(1);
});
