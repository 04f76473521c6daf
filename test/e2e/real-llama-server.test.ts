import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { realServerTestModel } from "../fixtures/llama-test-model.ts";
import { HOSTILE_SERVER } from "../fixtures/mcp-hostile.ts";
import { RECORDINGS } from "../fixtures/recordings-dir.ts";
import { writeSlowLoadingModel } from "../fixtures/slow-loading-model.ts";
import { alive, waitUntil } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { expectGoneAfterCoreKill, llamaChildren, noteTiming } from "./core-kill.ts";

// Opt-in: the compiled core driving a real llama-server end to end (plan → start → chat →
// cancel → shutdown). A tiny random-weight GGUF the fixture writes is enough:
// its replies are gibberish, so only the shapes are checked.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
// LOCAL_AI_TEST_MODEL overrides the tiny model the fixture writes (test/fixtures/llama-test-model.ts).
const MODEL = BINARY ? realServerTestModel() : undefined;

if (!BINARY || !MODEL) {
  test.skip("real llama-server e2e: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else {
  describe("the compiled core with a real llama-server", () => {
    test("plan, warmup, a streamed chat, a cancelled chat, shutdown with nothing left running", async () => {
      await using dir = tmpdir();
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120 }`,
          // The default config: no model.max_tokens, so a random-weight model that never ends its
          // reply runs to the end of its slot (issue 10 item 1: that is a result, not an error).
          `model: { path: ${JSON.stringify(MODEL)} }`,
          "agents: [{ name: assistant, system_prompt: You are terse. }]",
        ].join("\n"),
      );
      await using core = spawnCore({ cwd: dir.path });
      const plan = await core.request({ id: "plan", method: "plan" }, 30_000);
      expect(plan.type).toBe("result");

      const warm = await core.request({ id: "warm", method: "warmup" }, 180_000);
      expect(warm.result).toMatchObject({ status: "ready" });

      const chat = await core.request({ id: "c1", method: "chat", params: { input: "Say hello." } }, 120_000);
      expect(chat.type).toBe("result");
      expect(typeof chat.result.response).toBe("string");
      const names = core.messages.filter((m) => m.id === "c1" && m.type === "event").map((m) => m.event);
      expect(names[0]).toBe("run_start");
      expect(names).toContain("llm_start");
      expect(names.at(-1)).toBe("final");
      for (const w of chat.result.warnings) expect(["context_full", "empty_reply"]).toContain(w.code);
      // However many tokens a line carries (docs/protocol.md#joined-pieces), the lines are the reply.
      const chunks = core.messages.filter((m) => m.id === "c1" && m.event === "llm_chunk");
      expect(chunks.map((m) => m.delta).join("")).toBe(chat.result.response);
      expect(chunks.length).toBeLessThanOrEqual(chat.result.usage.completion_tokens);

      core.send({
        id: "c2",
        method: "chat",
        params: { input: "Count to one thousand, one number per line." },
      });
      await core.waitFor((ms) => ms.some((m) => m.id === "c2" && m.event === "llm_chunk"), 60_000);
      const cancel = await core.request({ id: "x", method: "cancel", params: { request_id: "c2" } });
      await core.waitFor(() => core.terminal("c2") !== undefined, 30_000);
      if (cancel.result.cancelled) expect(core.terminal("c2")).toMatchObject({ code: "cancelled" });

      // This core's llama-servers (its children): other sessions on the machine may run the
      // same binary at the same time.
      const servers = Bun.spawnSync(["pgrep", "-P", String(core.proc.pid), "-f", BINARY])
        .stdout.toString()
        .split("\n")
        .filter(Boolean)
        .map(Number);
      expect(servers.length).toBeGreaterThan(0);
      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
      for (const pid of servers) expect(alive(pid)).toBe(false);
    }, 400_000);

    /** A chat whose agent offers MCP server `h` (the hostile server in `mode`): its tools_unavailable warning. */
    async function toolsWarning(mode: string): Promise<string | undefined> {
      await using dir = tmpdir();
      const config = {
        app: { data_dir: "./data" },
        llama: { binary: BINARY, startup_timeout_s: 120, parallel: 1 },
        model: { path: MODEL, context: 1024, max_tokens: 4 },
        agents: [{ name: "assistant", system_prompt: "Be brief.", tools: ["h.*"] }],
        memory: { enabled: false },
        mcp_servers: [
          { name: "h", command: process.execPath, args: [HOSTILE_SERVER], env: { MCP_HOSTILE_MODE: mode } },
        ],
      };
      writeFileSync(join(dir.path, "config.yaml"), JSON.stringify(config));
      await using core = spawnCore({ cwd: dir.path });
      const r = await core.request({ id: "1", method: "chat", params: { input: "hello" } }, 120_000);
      expect(r.type).toBe("result");
      const warned = (r.result.warnings as { code: string; message: string }[]).find(
        (w) => w.code === "tools_unavailable",
      );
      await core.request({ id: "x", method: "shutdown" }, 30_000);
      expect(await core.exited()).toBe(0);
      return warned?.message;
    }

    test("a tool it cannot offer (a $ref to another document, transcripts/95e) is left out with tools_unavailable; the chat is answered", async () => {
      const warned = await toolsWarning("remote-ref-input");
      expect(warned).toContain("remote");
      expect(warned).toContain("Unsupported ref");
    }, 240_000);

    test("a tool whose grammar it makes but cannot parse (3000 items, transcripts/95f) is found by a probe and left out", async () => {
      const warned = await toolsWarning("repetition-input");
      expect(warned).toContain("many");
      expect(warned).toContain("failed to parse grammar");
    }, 240_000);

    test("status through a start, and one idle sleep and wake (llama.idle_sleep_s: 2) with waking progress", async () => {
      await using dir = tmpdir();
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120, idle_sleep_s: 2 }`,
          `model: { path: ${JSON.stringify(MODEL)}, max_tokens: 8 }`,
          "agents: [{ name: assistant, system_prompt: You are terse. }]",
        ].join("\n"),
      );
      await using core = spawnCore({ cwd: dir.path });
      let n = 0;
      const status = async () => (await core.request({ id: `s${n++}`, method: "status" })).result;
      expect((await status()).llama.state).toBe("stopped");

      const warm = await core.request({ id: "warm", method: "warmup" }, 180_000);
      expect(warm.result).toMatchObject({ status: "ready" });
      const ready = await status();
      expect(ready.llama).toMatchObject({
        state: "ready",
        waking: false,
        idle_sleep_s: 2,
        model: { path: MODEL },
      });
      expect(ready.llama.pid).toBeGreaterThan(0);
      expect(ready.llama.rss_bytes).toBeGreaterThan(1024 * 1024);
      expect(typeof ready.llama.model.name).toBe("string");

      const first = await core.request(
        { id: "c1", method: "chat", params: { input: "Say hello." } },
        120_000,
      );
      expect(first.type).toBe("result");
      // Idle 2 s, plus llama-server's own check (once a second), plus our first look.
      let asleep = await status();
      for (
        const deadline = Date.now() + 15_000;
        asleep.llama.state !== "sleeping" && Date.now() < deadline;
      ) {
        await Bun.sleep(250);
        asleep = await status();
      }
      expect(asleep.llama.state).toBe("sleeping");
      // Unloaded: llama-server gave memory back (transcripts/85: 51 MB → 37 MB on the tiny model).
      expect(asleep.llama.rss_bytes).toBeLessThan(ready.llama.rss_bytes);

      const second = await core.request({ id: "c2", method: "chat", params: { input: "Again." } }, 120_000);
      expect(second.type).toBe("result");
      const evs = core.messages.filter((m) => m.id === "c2" && m.type === "event");
      const phases = evs.filter((e) => e.event === "warmup_progress").map((e) => e.phase);
      expect(phases[0]).toBe("waking");
      expect(phases.at(-1)).toBe("ready");
      expect(evs.findIndex((e) => e.phase === "ready")).toBeLessThan(
        evs.findIndex((e) => e.event === "llm_start"),
      );
      expect((await status()).llama.state).toBe("ready");
      // Our wake (POST /tokenize) is what woke it: the log says so before the chat's task.
      const log = readFileSync(join(dir.path, "data", "logs", "llama-server.log"), "utf8");
      expect(log).toContain("exiting sleeping state");

      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
    }, 400_000);

    test("prompt reuse (docs/agent.md#prompt-reuse): the turn after a core restart and after idle sleep is restored, not processed again", async () => {
      await using dir = tmpdir();
      writeFileSync(
        join(dir.path, "config.yaml"),
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120, idle_sleep_s: 2 }`,
          `model: { path: ${JSON.stringify(MODEL)}, max_tokens: 8 }`,
          "agents: [{ name: assistant, system_prompt: You are terse., temperature: 0 }]",
          "memory: { enabled: false }",
        ].join("\n"),
      );
      let n = 0;
      const chat = async (core: ReturnType<typeof spawnCore>, input: string) => {
        const r = await core.request(
          { id: `c${n++}`, method: "chat", params: { session_id: "r", input } },
          120_000,
        );
        expect(r.type).toBe("result");
        return r.result.usage as { prompt_tokens: number; cached_tokens: number };
      };
      const questions = [
        "Tell me about the sea and the waves and the tides of the northern bay.",
        "And what about the moon, which pulls the tides twice a day?",
        "And the lighthouse on the cape, who keeps it lit at night?",
      ];
      {
        await using core = spawnCore({ cwd: dir.path });
        for (const q of questions) await chat(core, q);
        await core.request({ id: "bye", method: "shutdown" }, 30_000);
        expect(await core.exited(30_000)).toBe(0);
      }
      await using core = spawnCore({ cwd: dir.path });
      const restarted = await chat(core, "Go on.");
      expect(restarted.cached_tokens / restarted.prompt_tokens).toBeGreaterThan(0.8);
      let state = "";
      for (const deadline = Date.now() + 20_000; state !== "sleeping" && Date.now() < deadline; ) {
        await Bun.sleep(250);
        state = (await core.request({ id: `s${n++}`, method: "status" })).result.llama.state;
      }
      expect(state).toBe("sleeping");
      const woken = await chat(core, "And then?");
      expect(woken.cached_tokens / woken.prompt_tokens).toBeGreaterThan(0.8);
      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
    }, 400_000);

    test("memory notes in the user message render with the model's template and with templates that take one system message at the top", async () => {
      for (const template of [null, "chatml_tools.jinja", "chatml_think.jinja"]) {
        await using dir = tmpdir();
        const extra = template
          ? `, extra_args: [--chat-template-file, ${JSON.stringify(join(RECORDINGS, template))}]`
          : "";
        writeFileSync(
          join(dir.path, "config.yaml"),
          [
            `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120${extra} }`,
            `model: { path: ${JSON.stringify(MODEL)}, max_tokens: 8 }`,
            "agents: [{ name: assistant, system_prompt: You are terse., temperature: 0 }]",
            "memory: { enabled: true, top_k: 2 }",
          ].join("\n"),
        );
        await using core = spawnCore({ cwd: dir.path });
        const first = await core.request(
          { id: "a", method: "chat", params: { session_id: "a", input: "my capybara is called Pancake" } },
          120_000,
        );
        expect(first.type).toBe("result");
        const second = await core.request(
          { id: "b", method: "chat", params: { session_id: "b", input: "what is my capybara called?" } },
          120_000,
        );
        expect(core.messages.find((m) => m.id === "b" && m.event === "memory_done")?.hits).toBeGreaterThan(0);
        expect(second.type).toBe("result");
        await core.request({ id: "bye", method: "shutdown" }, 30_000);
        expect(await core.exited(30_000)).toBe(0);
      }
    }, 400_000);

    test("a quantized KV cache the model's head size refuses is a plan error, not a crashed start; an oversized prompt is invalid_request", async () => {
      await using dir = tmpdir();
      const config = (extra: string) =>
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120${extra} }`,
          `model: { path: ${JSON.stringify(MODEL)} }`,
          "agents: [{ name: assistant, system_prompt: You are terse. }]",
        ].join("\n");
      // test/fixtures/llama-server/README.md: q8_0 (blocks of 32) on head size 16 makes
      // llama-server exit 1.
      writeFileSync(join(dir.path, "q8.yaml"), config(", cache_type_k: q8_0"));
      await using q8 = spawnCore({ cwd: dir.path, args: ["--config", "q8.yaml"] });
      const refused = await q8.request({ id: "c", method: "chat", params: { input: "hi" } }, 60_000);
      expect(refused).toMatchObject({ type: "error", code: "model_plan_error" });
      expect(refused.message).toContain("cache_type_k");
      await q8.request({ id: "bye", method: "shutdown" }, 30_000);

      writeFileSync(join(dir.path, "config.yaml"), config(""));
      await using core = spawnCore({ cwd: dir.path });
      const paste = "lorem ipsum dolor ".repeat(6000);
      const long = await core.request({ id: "p", method: "chat", params: { input: paste } }, 120_000);
      expect(long).toMatchObject({
        type: "error",
        code: "invalid_request",
        data: { reason: "context_overflow" },
      });
      expect(long.data.n_prompt_tokens).toBeGreaterThan(long.data.n_ctx);
      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
    }, 400_000);
  });

  // Issue 19 (docs/supervisor.md#child-mode): llama-server runs as the core's child, so a SIGKILL
  // of the core, in any state, leaves none behind; the processes are looked up afterwards, not read
  // from records.
  describe("the compiled core killed outright with a real llama-server (child mode)", () => {
    const configure = (dir: string, model: string, extra = "", llama = "") =>
      writeFileSync(
        join(dir, "config.yaml"),
        [
          `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120${llama} }`,
          `model: { path: ${JSON.stringify(model)}${extra} }`,
          "agents: [{ name: assistant, system_prompt: You are terse. }]",
        ].join("\n"),
      );

    test("idle: gone within 1 s of the SIGKILL; doctor said it runs as the core's child", async () => {
      await using dir = tmpdir();
      configure(dir.path, MODEL);
      const core = spawnCore({ cwd: dir.path });
      const doctor = await core.request({ id: "d", method: "doctor" }, 60_000);
      const binary = doctor.result.checks.find((c: { id: string }) => c.id === "binary");
      expect(binary.data.child_mode).toBe(true);
      expect((await core.request({ id: "w", method: "warmup" }, 180_000)).result).toMatchObject({
        status: "ready",
      });
      await expectGoneAfterCoreKill(core, BINARY, 1000, "real llama-server, idle: core SIGKILL → gone");
    }, 400_000);

    test("streaming: gone within 1 s of the SIGKILL", async () => {
      await using dir = tmpdir();
      // No reply cap: a random-weight model talks until its slot is full.
      configure(dir.path, MODEL);
      const core = spawnCore({ cwd: dir.path });
      core.send({ id: "c", method: "chat", params: { input: "Count to one thousand." } });
      await core.waitFor(
        (ms) => ms.filter((m) => m.id === "c" && m.event === "llm_chunk").length >= 5,
        180_000,
      );
      await expectGoneAfterCoreKill(core, BINARY, 1000, "real llama-server, streaming: core SIGKILL → gone");
    }, 400_000);

    test("loading: gone within its load time + 1 s of the SIGKILL (it sees stdin's end once loaded)", async () => {
      await using dir = tmpdir();
      // Read, not mapped: a load of about a gigabyte that takes a second or more.
      const model = writeSlowLoadingModel(dir.path, 12);
      configure(dir.path, model, ", max_tokens: 4", ", mmap: false");
      // How long this model takes to load here, from one full start.
      await using first = spawnCore({ cwd: dir.path });
      const warm = await first.request({ id: "w", method: "warmup" }, 180_000);
      expect(warm.result).toMatchObject({ status: "ready" });
      const loadMs = warm.result.elapsed_ms as number;
      noteTiming("real llama-server, the slow model's load (warmup)", loadMs);
      expect(loadMs).toBeGreaterThan(1000);
      await first.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await first.exited(30_000)).toBe(0);

      const core = spawnCore({ cwd: dir.path });
      core.send({ id: "w", method: "warmup" });
      await core.waitFor((ms) => ms.some((m) => m.id === "w" && m.phase === "loading"), 60_000);
      await expectGoneAfterCoreKill(
        core,
        BINARY,
        loadMs + 1000,
        "real llama-server, loading: core SIGKILL → gone",
      );
    }, 400_000);

    test("a chat sent at once after llama-server's SIGKILL restarts it and is served (issue 19 item 3)", async () => {
      await using dir = tmpdir();
      configure(dir.path, MODEL, ", max_tokens: 8");
      await using core = spawnCore({ cwd: dir.path });
      expect((await core.request({ id: "w", method: "warmup" }, 180_000)).type).toBe("result");
      const [dead] = llamaChildren(core, BINARY);
      process.kill(dead as number, "SIGKILL");
      const t0 = performance.now();
      const chat = await core.request({ id: "c", method: "chat", params: { input: "hi" } }, 180_000);
      noteTiming("real llama-server, chat after its SIGKILL → result", Math.round(performance.now() - t0));
      expect(chat.type).toBe("result");
      const phases = core.messages
        .filter((m) => m.id === "c" && m.event === "warmup_progress")
        .map((m) => m.phase);
      expect(phases).toContain("restarting");
      expect(llamaChildren(core, BINARY)).not.toContain(dead);
      expect(await waitUntil(() => !isAlive(dead as number), 2000)).toBe(true);
      await core.request({ id: "bye", method: "shutdown" }, 30_000);
      expect(await core.exited(30_000)).toBe(0);
    }, 400_000);
  });
}
