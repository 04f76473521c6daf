import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { alive, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// `embed` end to end from the compiled binary (docs/models.md "Several models", docs/protocol.md `embed`; issue 28): a chat model and
// an embedding model (the BERT fixture, tiny-embed.gguf's shape) each on its own stand-in
// llama-server, the embedding one started as the plan says (docs/plan.md "Embedding models").

const norm = (v: number[]) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));

describe.skipIf(process.platform === "win32")("embed (compiled core)", () => {
  test("a string and a list embedded, refusals named, a chat beside it; both servers at once", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      script: [{ content: "chatted" }],
      extraYaml: "models:\n  - {name: embed, path: ./embed.gguf, kind: embedding}\n",
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    await core.request({ id: 0, method: "initialize" });

    const plan = (await core.request({ id: 1, method: "plan", params: { model: "embed" } }, 20_000)).result;
    expect(plan.plan.embedding).toEqual({ pooling: "mean", batch: 512, causal: false });
    expect(plan.plan.argv.join(" ")).toContain("--embeddings --pooling mean -b 512 -ub 512");

    const one = (await core.request({ id: 2, method: "embed", params: { input: "hello world" } }, 30_000))
      .result;
    expect(one).toMatchObject({ model: "embed", dimensions: 64 });
    expect(one.embeddings).toHaveLength(1);
    expect(Math.abs(norm(one.embeddings[0]) - 1)).toBeLessThan(1e-3);
    // [CLS] hello world [SEP]
    expect(one.usage.prompt_tokens).toBeGreaterThan(0);

    const input = ["first text", "hello world", "a third, longer piece of text"];
    const list = (await core.request({ id: 3, method: "embed", params: { input, model: "embed" } })).result;
    expect(list.embeddings).toHaveLength(3);
    for (const v of list.embeddings) {
      expect(v).toHaveLength(64);
      expect(Math.abs(norm(v) - 1)).toBeLessThan(1e-3);
    }
    // In order: the same text gives the same vector.
    expect(list.embeddings[1]).toEqual(one.embeddings[0]);
    expect(list.usage.prompt_tokens).toBeGreaterThan(one.usage.prompt_tokens);

    // Recording 114: a string past the batch is refused, never truncated, and named by its index.
    const long = "word ".repeat(600);
    const tooLong = await core.request({ id: 4, method: "embed", params: { input: ["short", long] } });
    expect(tooLong.code).toBe("invalid_request");
    expect(tooLong.data?.field).toBe("input.1");
    const empty = await core.request({ id: 5, method: "embed", params: { input: [] } });
    expect(empty).toMatchObject({ code: "invalid_request", data: { field: "input" } });
    // A newcomer's wrong type is named, not zod's bare "Invalid input".
    const number = await core.request({ id: "5n", method: "embed", params: { input: 5 } });
    expect(number.message).toBe("params.input: expected string or array, received number");
    const inList = await core.request({ id: "5l", method: "embed", params: { input: ["a", 7] } });
    expect(inList).toMatchObject({ code: "invalid_request", data: { field: "input.1" } });
    // Recording 116: an encoder computes no logits; the core refuses the chat before asking it.
    const chatOnEmbed = await core.request({
      id: 6,
      method: "chat",
      params: { input: "hi", model: "embed" },
    });
    expect(chatOnEmbed.code).toBe("invalid_request");
    expect(chatOnEmbed.data?.field).toBe("model");

    const chat = await core.request({ id: 7, method: "chat", params: { input: "hi" } }, 30_000);
    expect(chat.result?.model).toBe("default");
    const status = (await core.request({ id: 8, method: "status" })).result;
    const rows = Object.fromEntries(status.models.map((m: any) => [m.name, m]));
    const pids = [rows.default.pid, rows.embed.pid] as number[];
    expect(new Set(pids).size).toBe(2);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    // The embedding server was started with the plan's flags (its own log names them).
    const log = readFileSync(join(stack.dataDir, "logs", "llama-server-embed.log"), "utf8");
    expect(log).toContain("--embeddings");

    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 90_000);

  // llama-server crashing on an input is a stand-in behaviour (FAKE_LLAMA_EMBED_CRASH_ON), modelled
  // on the recorded aborts mid-request: each time it is sent the input, the process dies (SIGABRT).
  test("an input that crashed the server twice in a row is refused unsent; the server serves the rest", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      knobs: { FAKE_LLAMA_EMBED_CRASH_ON: "POISON" },
      extraYaml: "models:\n  - {name: embed, path: ./embed.gguf, kind: embedding}\n",
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    await core.request({ id: 0, method: "initialize" });
    const embed = (id: number, input: string[]) =>
      core.request({ id, method: "embed", params: { input, model: "embed" } }, 30_000);
    expect((await embed(1, ["fine"])).result?.embeddings).toHaveLength(1);
    // A batch the server died on: which input did it is not known yet.
    const first = await embed(2, ["fine", "a POISON pill"]);
    expect(first).toMatchObject({ code: "internal_error", data: { reason: "server_failed" } });
    expect(first.message).toContain("crashed");
    // Alone, it crashes the (restarted) server again: named, and never sent again.
    const second = await embed(3, ["a POISON pill"]);
    expect(second).toMatchObject({
      code: "invalid_request",
      data: { field: "input.0", reason: "crashes_server" },
    });
    const third = await embed(4, ["other", "a POISON pill"]);
    expect(third).toMatchObject({
      code: "invalid_request",
      data: { field: "input.1", reason: "crashes_server" },
    });
    expect((await embed(5, ["fine", "other"])).result?.embeddings).toHaveLength(2);
    const status = (await core.request({ id: 6, method: "status" })).result;
    const row = status.models.find((m: { name: string }) => m.name === "embed");
    expect(row.state).toBe("ready");
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 90_000);
  test("memory.embedding_model is the default over the first entry; none or a chat model refused naming model; a long list batched in order", async () => {
    await using dir = tmpdir();
    writeGguf(dir.path, "embed.gguf", bertModel());
    const stack = writeStack(dir.path, {
      extraYaml: [
        "  embedding_model: e2",
        "models:",
        "  - {name: e1, path: ./embed.gguf, kind: embedding}",
        "  - {name: e2, path: ./embed.gguf, kind: embedding}",
      ].join("\n"),
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const one = await core.request({ id: 1, method: "embed", params: { input: "x" } }, 30_000);
    expect(one.result?.model).toBe("e2");
    const onChat = await core.request({ id: 2, method: "embed", params: { input: "x", model: "default" } });
    expect(onChat).toMatchObject({ code: "invalid_request", data: { field: "model" } });
    // More inputs than one request to llama-server carries (1024): every vector back, in order.
    const input = Array.from({ length: 1500 }, (_, i) => `text number ${i}`);
    const many = (await core.request({ id: 3, method: "embed", params: { input, model: "e1" } }, 30_000))
      .result;
    expect(many.embeddings).toHaveLength(1500);
    const last = (await core.request({ id: 4, method: "embed", params: { input: input[1499], model: "e1" } }))
      .result;
    expect(many.embeddings[1499]).toEqual(last.embeddings[0]);
    core.closeStdin();
    expect(await core.exited()).toBe(0);

    // No embedding model configured at all.
    await using bare = tmpdir();
    const plain = writeStack(bare.path, {});
    await using alone = spawnCore({ cwd: bare.path, env: plain.env });
    const none = await alone.request({ id: 5, method: "embed", params: { input: "x" } });
    expect(none).toMatchObject({ code: "invalid_request", data: { field: "model" } });
  }, 90_000);
});
