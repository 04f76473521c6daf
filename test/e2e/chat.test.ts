import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { alive, waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The whole product from the host's side: the compiled core supervising the llama-server
// stand-in (spawned exactly like the real binary) and the test MCP server.
const onPosix = process.platform !== "win32";
const events = (ms: Record<string, any>[], id: unknown) =>
  ms.filter((m) => m.id === id && m.type === "event");

describe.skipIf(!onPosix)("chat through the compiled binary", () => {
  test("warmup, a streamed answer with the protocol's events and result, then shutdown leaves no llama-server", async () => {
    await using dir = tmpdir();
    // An event per token: the default 5 ms window joins the tokens a loaded box reads at once
    // (CI met one chunk; docs/protocol.md "Joined pieces").
    const stack = writeStack(dir.path, {
      script: [{ content: "Hello from the stand-in" }],
      app: ["stream_gather_ms: 0"],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const init = await core.request({ id: 0, method: "initialize" });
    expect(init.result.capabilities.methods).toEqual(expect.arrayContaining(["chat", "warmup", "cancel"]));
    const warm = await core.request({ id: "w", method: "warmup" });
    expect(warm.result).toMatchObject({ status: "ready", slots: 1 });
    expect(events(core.messages, "w").map((e) => e.phase)).toContain("ready");
    const servers = stack.recordedServers();
    expect(servers).toHaveLength(1);

    const r = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
    expect(r.type).toBe("result");
    expect(r.result).toMatchObject({ response: "Hello from the stand-in", warnings: [], dropped_events: 0 });
    expect(r.result.session_id).toMatch(/^[a-z0-9]{8}$/);
    const names = events(core.messages, 1).map((e) => e.event);
    expect(names.slice(0, 4)).toEqual(["run_start", "memory_start", "memory_done", "llm_start"]);
    expect(names.slice(-2)).toEqual(["llm_done", "final"]);
    const chunks = events(core.messages, 1).filter((e) => e.event === "llm_chunk");
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((c) => c.delta).join("")).toBe("Hello from the stand-in");
    expect(events(core.messages, 1)[0]).toMatchObject({ user_input: "hi", trace_id: r.result.trace_id });

    // The host's model picker on a core serving one model: the file it serves is marked loaded
    // (the one supervisor's snapshot, methods/models.ts; several models have a test of their own).
    const listed = (await core.request({ id: "m", method: "models" }, 20_000)).result.models;
    expect(listed.map((m: any) => [m.file, m.loaded])).toEqual([["model.gguf", true]]);

    await core.request({ id: 2, method: "shutdown" });
    expect(await core.exited()).toBe(0);
    expect(alive(servers[0]!)).toBe(false);
    expect(stack.recordedServers()).toEqual([]);
  });

  test("MCP tools: a call runs, an approval-required tool is denied, then granted", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [
        { tool_calls: [{ name: "t__echo", arguments: '{"text":"ping"}' }] },
        { content: "echoed" },
        { tool_calls: [{ name: "t__write_note", arguments: '{"text":"secret"}' }] },
        { content: "could not" },
        { tool_calls: [{ name: "t__write_note", arguments: '{"text":"ok"}' }] },
        { content: "written" },
      ],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const a = await core.request({
      id: "a",
      method: "chat",
      params: { input: "echo ping", session_id: "s1" },
    });
    expect(a.result.response).toBe("echoed");
    const doneA = events(core.messages, "a").find((e) => e.event === "tool_done");
    expect(doneA).toMatchObject({ tool: "t.echo", status: "ok", retryable: false });
    expect(doneA!.preview).toContain("echo: ping");

    const b = await core.request({ id: "b", method: "chat", params: { input: "write", session_id: "s1" } });
    expect(b.result.response).toBe("could not");
    expect(events(core.messages, "b").find((e) => e.event === "tool_done")).toMatchObject({
      status: "denied",
    });
    expect(stack.mcpCalls().filter((c) => c.tool === "write_note")).toHaveLength(0);

    const c = await core.request({
      id: "c",
      method: "chat",
      params: { input: "write", session_id: "s1", approve_execution: true },
    });
    expect(c.result.response).toBe("written");
    expect(stack.mcpCalls().filter((x) => x.tool === "write_note")).toHaveLength(1);
    // The model saw the earlier turns of the session.
    const last = stack.llamaRequests().at(-1)!;
    expect(last.messages.some((m) => m.content === "echo ping")).toBe(true);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  });

  test("no MCP server outlives the core: a crashed one restarts, and shutdown mid-tool stops the rest", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [
        { tool_calls: [{ name: "t__crash", arguments: "{}" }] },
        { tool_calls: [{ name: "t__echo", arguments: '{"text":"back"}' }] },
        { content: "survived" },
        { tool_calls: [{ name: "t__slow", arguments: '{"ms":60000}' }] },
      ],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const a = await core.request({ id: "a", method: "chat", params: { input: "crash it" } });
    expect(a.result.response).toBe("survived");
    expect(events(core.messages, "a").filter((e) => e.event === "tool_done")).toEqual([
      expect.objectContaining({ tool: "t.crash", status: "error", retryable: true }),
      expect.objectContaining({ tool: "t.echo", status: "ok" }),
    ]);
    core.send({ id: "b", method: "chat", params: { input: "slow" } });
    await waitUntil(() => stack.mcpCalls().some((c) => c.tool === "slow"), 10_000);
    const pids = stack.mcpPids();
    expect(pids).toHaveLength(2);
    expect(alive(pids[1]!)).toBe(true);
    const down = await core.request({ id: "s", method: "shutdown" });
    expect(down.type).toBe("result");
    expect(core.terminal("b")).toMatchObject({ type: "error", code: "cancelled" });
    expect(await core.exited()).toBe(0);
    for (const pid of pids) expect(alive(pid)).toBe(false);
  }, 30_000);

  test("cancel mid-stream stops generation; a crash mid-stream is an error and the next chat restarts it", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [
        // Streamed, then silent until cancelled: the cancel comes mid-stream whatever the load.
        { content: "one two three four five six seven eight nine ten", chunk_delay_ms: 300, hang: true },
        { content: "a b c d e f", crash_after_chunks: 2 },
        { content: "back again" },
      ],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "slow", method: "chat", params: { input: "count" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "slow" && m.event === "llm_chunk"));
    expect(
      (await core.request({ id: "x", method: "cancel", params: { request_id: "slow" } })).result,
    ).toEqual({
      cancelled: true,
    });
    await core.waitFor(() => core.terminal("slow") !== undefined);
    expect(core.terminal("slow")).toMatchObject({ type: "error", code: "cancelled" });
    expect(events(core.messages, "slow").at(-1)).toMatchObject({ event: "loop_abort", reason: "cancelled" });
    const firstServer = stack.recordedServers()[0]!;

    const crashed = await core.request({ id: "crash", method: "chat", params: { input: "go" } });
    expect(crashed).toMatchObject({ type: "error", code: "internal_error" });
    expect(await waitUntil(() => !alive(firstServer), 5000)).toBe(true);

    // A restarted stand-in reads its script from the start: give it the next reply.
    writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, JSON.stringify([{ content: "back again" }]));
    const again = await core.request({ id: "again", method: "chat", params: { input: "go" } });
    expect(again.result.response).toBe("back again");
    expect(stack.recordedServers()[0]).not.toBe(firstServer);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  });

  test("two parallel chats; cancelling one leaves the other untouched", async () => {
    await using dir = tmpdir();
    const release = join(dir.path, "release");
    const stack = writeStack(dir.path, {
      parallel: 2,
      script: [
        // The first, streamed, then silent until cancelled; the second, sent once the first
        // streams, stops after its first token until the test has cancelled the first.
        { content: "alpha beta gamma delta epsilon zeta", chunk_delay_ms: 150, hang: true },
        { content: "one two three four five six", chunk_delay_ms: 150, hold_file: release },
      ],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const init = await core.request({ id: 0, method: "initialize" });
    expect(init.result.capabilities.parallel_chat).toEqual({ supported: true, max_concurrent: 2 });
    core.send({ id: 1, method: "chat", params: { input: "first", session_id: "p1" } });
    await core.waitFor((ms) => ms.some((m) => m.id === 1 && m.event === "llm_chunk"));
    core.send({ id: 2, method: "chat", params: { input: "second", session_id: "p2" } });
    await core.waitFor((ms) => [1, 2].every((id) => ms.some((m) => m.id === id && m.event === "llm_chunk")));
    const ambiguous = await core.request({ id: "c0", method: "cancel" });
    expect(ambiguous).toMatchObject({ type: "error", code: "invalid_request" });
    expect(
      (await core.request({ id: "c1", method: "cancel", params: { request_id: 1 } })).result.cancelled,
    ).toBe(true);
    await core.waitFor(() => core.terminal(1) !== undefined);
    writeFileSync(release, "");
    await core.waitFor(() => core.terminal(1) !== undefined && core.terminal(2) !== undefined, 20_000);
    expect(core.terminal(1)).toMatchObject({ code: "cancelled" });
    expect(core.terminal(2)!.result.response.split(" ").length).toBe(6);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  });

  test("ids that could escape the data directory are invalid_request naming the field", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    for (const [field, value] of [
      ["user_id", "../../etc"],
      ["session_id", ".hidden"],
      ["session_id", "CON"],
      ["user_id", "a/b"],
      ["session_id", "x".repeat(129)],
    ] as const) {
      const r = await core.request({ id: `${field}-${value}`, method: "chat", params: { [field]: value } });
      expect(r).toMatchObject({ type: "error", code: "invalid_request", data: { field } });
    }
    expect(stack.recordedServers()).toEqual([]); // nothing was started for bad requests
    core.closeStdin();
    await core.exited();
  });

  test("kill -9 of the core mid-turn: the next core reaps the orphan and `resume` finishes without re-running tools", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [
        { tool_calls: [{ name: "t__echo", arguments: '{"text":"first"}' }] },
        { tool_calls: [{ name: "t__slow", arguments: '{"ms":2000}' }] },
      ],
      // A build without child mode, whose orphan only the next core's reaper stops.
      knobs: { FAKE_LLAMA_NO_CHILD_MODE: "1" },
    });
    const first = spawnCore({ cwd: dir.path, env: stack.env });
    first.send({ id: "turn", method: "chat", params: { input: "do two things", session_id: "k9" } });
    await first.waitFor(() => stack.mcpCalls().some((c) => c.tool === "slow"), 20_000);
    const orphan = stack.recordedServers()[0]!;
    expect(alive(orphan)).toBe(true);
    first.proc.kill("SIGKILL");
    await first.proc.exited;

    // The resumed turn's script: the stand-in restarts from a fresh script file.
    writeFileSync(stack.env.FAKE_LLAMA_SCRIPT, JSON.stringify([{ content: "both done" }]));
    await using second = spawnCore({ cwd: dir.path, env: stack.env });
    const started = Date.now();
    expect(await waitUntil(() => !alive(orphan), 10_000)).toBe(true);
    expect(Date.now() - started).toBeLessThan(10_000);

    const resumed = await second.request(
      { id: "r", method: "chat", params: { session_id: "k9", resume: true } },
      20_000,
    );
    expect(resumed.type).toBe("result");
    expect(resumed.result.response).toBe("both done");
    // echo ran once (before the kill) and was not re-run; the interrupted slow call is re-run.
    expect(stack.mcpCalls().filter((c) => c.tool === "echo")).toHaveLength(1);
    second.closeStdin();
    expect(await second.exited()).toBe(0);
  });
});
