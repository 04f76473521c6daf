import { expect, spyOn, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { streamCompletion } from "../../src/llama/completion.ts";
import { logger } from "../../src/util/logger.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ChatHarness, type Msg } from "./harness.ts";

/**
 * Where a turn's own work goes relative to llama-server's (issue 11 item 4, docs/performance.md
 * "Chat overhead"): a cold turn lets the start reach the spawn first; a turn's first checkpoint
 * is made durable while llama-server reads the prompt (streamCompletion's onSent runs with the
 * request already on its way) and is in place before the host sees the first chunk.
 */

function sseServer() {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.text();
      const body = [
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "hi" }, finish_reason: null }] })}`,
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}`,
        "data: [DONE]",
        "",
      ].join("\n\n");
      return new Response(body, { headers: { "Content-Type": "text/event-stream" } });
    },
  });
}

test("onSent runs while the request is already on its way", async () => {
  // The server lives in a child process and leaves a file once the request has reached it;
  // onSent holds this thread until that file is there, so it can appear only if the request
  // left before onSent returned. The cap only keeps a broken build from hanging the suite.
  using dir = tmpdir();
  const arrived = join(dir.path, "arrived");
  const proc = Bun.spawn(
    [
      process.execPath,
      "-e",
      `const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async (r) => { await r.text();
        require("node:fs").writeFileSync(${JSON.stringify(arrived)}, "");
        return new Response("data: " + JSON.stringify({ choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] }) + "\\n\\ndata: [DONE]\\n\\n", { headers: { "Content-Type": "text/event-stream" } }); } });
       console.log(s.port);`,
    ],
    { stdout: "pipe" },
  );
  try {
    const reader = proc.stdout.getReader();
    const port = Number(new TextDecoder().decode((await reader.read()).value).trim());
    let seenInOnSent = false;
    const result = await streamCompletion(
      { baseUrl: `http://127.0.0.1:${port}`, apiKey: "k" },
      { messages: [{ role: "user", content: "x" }] },
      {
        signal: new AbortController().signal,
        onDelta: () => {},
        onSent: () => {
          const cap = Date.now() + 30_000;
          while (!existsSync(arrived) && Date.now() < cap) Bun.sleepSync(1);
          seenInOnSent = existsSync(arrived);
        },
      },
    );
    expect(result.content).toBe("ok");
    // The server had the request while onSent still held this thread.
    expect(seenInOnSent).toBe(true);
  } finally {
    proc.kill();
  }
});

test("what onSent throws ends the request and is thrown as it is", async () => {
  using server = sseServer();
  const boom = new Error("ENOSPC: no space left on device");
  const err = await streamCompletion(
    { baseUrl: `http://127.0.0.1:${server.port}`, apiKey: "k" },
    { messages: [{ role: "user", content: "x" }] },
    {
      signal: new AbortController().signal,
      onDelta: () => {},
      onSent: () => {
        throw boom;
      },
    },
  ).catch((e) => e);
  expect(err).toBe(boom);
});

test("the turn's first checkpoint is in place before the host sees the first chunk", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ content: ["one", " two"] });
  let atFirstChunk: unknown;
  h.onEmit = (m: Msg) => {
    if (m.event === "llm_chunk" && atFirstChunk === undefined) atFirstChunk = h.checkpoint("cp") ?? null;
  };
  const { terminal } = await h.chat("c", { input: "keep me", session_id: "cp" });
  expect(terminal.type).toBe("result");
  expect(atFirstChunk).toMatchObject({ step: 0, user_input: "keep me" });
  // Finished: the checkpoint is cleared, the turn is in the history.
  expect(h.checkpoint("cp")).toBeUndefined();
  expect(h.history("cp")).toHaveLength(2);
});

test("a turn that began a start lets it reach the spawn before its own work, at most 50 ms", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const at: Record<string, number> = {};
  h.onEmit = (m: Msg) => {
    if (m.event === "run_start") at[String(m.id)] = performance.now();
  };
  // Spawned after 30 ms: run_start waits for it.
  h.llama.script({ content: "a" }, { content: "b" });
  const spawned = Promise.withResolvers<void>();
  h.provider.nextPrestart = { spawned: spawned.promise };
  let t0 = performance.now();
  setTimeout(() => spawned.resolve(), 30);
  await h.chat("c1", { input: "hi" });
  expect(at.c1! - t0).toBeGreaterThanOrEqual(28);
  // Never spawned (a slow probe): the turn goes on after the cap, it does not hang.
  h.provider.nextPrestart = { spawned: new Promise(() => {}) };
  t0 = performance.now();
  const { terminal } = await h.chat("c2", { input: "hi" });
  expect(terminal.type).toBe("result");
  expect(at.c2! - t0).toBeGreaterThanOrEqual(45);
  expect(at.c2! - t0).toBeLessThan(1000);
});

test("a step's log line says when its request was written and its first token read, on the epoch's clock", async () => {
  // docs/performance.md, "The core's own path": a host (the bench) splits the first token
  // into the core's time and llama-server's with these two times.
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ content: ["one", " two"] });
  const epoch = () => performance.timeOrigin + performance.now();
  let firstChunk = 0;
  h.onEmit = (m: Msg) => {
    if (m.event === "llm_chunk" && firstChunk === 0) firstChunk = epoch();
  };
  const lines: string[] = [];
  const info = spyOn(logger, "info").mockImplementation((line: string) => void lines.push(line));
  const before = epoch();
  try {
    await h.chat("c", { input: "hi" });
  } finally {
    info.mockRestore();
  }
  const step = lines.find((l) => / step=0 finish=stop /.test(l));
  const at = JSON.parse(/ at=(\{[^}]*\})/.exec(step ?? "")?.[1] ?? "{}");
  expect(at.request_written).toBeGreaterThan(before);
  expect(at.first_token).toBeGreaterThan(at.request_written);
  // The token was read before its chunk went out to the host.
  expect(firstChunk).toBeGreaterThanOrEqual(at.first_token);
});
