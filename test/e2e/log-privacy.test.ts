import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { NOT_LOGGED } from "../../src/runtime/log-redact.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// llama-server writes a reply it cannot parse into its log whole, newlines and all
// (quirks/90c; the stand-in does the same for a turn's `unparsed`). Through the compiled core,
// that reply must reach neither data_dir/logs nor a crash's log_tail, which goes to whichever
// chat is running: here another user's (docs/supervisor.md, "Logs").
const onPosix = process.platform !== "win32";
const SECRET = "ZQX-4417-ANN";

describe.skipIf(!onPosix)("a model's reply quoted in llama-server's log", () => {
  test("is kept out of the log file and of another user's crash error; the user's erase leaves nothing", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [
        { unparsed: `Dear Dr Ames,\nmy account is ${SECRET}\n\nregards, Ann` },
        { content: "Written." },
        { content: "a b c d e f", crash_after_chunks: 2 },
      ],
      // No restart: Bob's chat gets the crash's error, with the log's last lines.
      llama: ["max_restarts: 0"],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    // llama-server streams the reply, then fails the request (quirks/90d): Ann saw her text, and
    // the model was asked again.
    const ann = await core.request({ id: 1, method: "chat", params: { user_id: "ann", input: "write it" } });
    expect(ann.result.response).toBe("Written.");
    const seen = core.messages.filter((m) => m.id === 1 && m.event === "llm_chunk").map((m) => m.delta);
    expect(seen.join("")).toContain(SECRET);
    const log = join(dir.path, "data", "logs", "llama-server.log");
    const written = readFileSync(log, "utf8");
    expect(written).toContain(`unparsed peg-native output: ${NOT_LOGGED}`);
    expect(written).not.toContain("regards, Ann");
    const crashed = await core.request({ id: 2, method: "chat", params: { user_id: "ann", input: "go" } });
    expect(crashed).toMatchObject({ type: "error", code: "internal_error" });

    const bob = await core.request({ id: 3, method: "chat", params: { user_id: "bob", input: "hi" } });
    expect(bob).toMatchObject({ type: "error", code: "internal_error" });
    const tail = (bob.data.log_tail as string[]).join("\n");
    expect(tail).toContain(NOT_LOGGED);
    expect(tail).toContain("stand-in crash");
    expect(tail).not.toContain(SECRET);

    expect((await core.request({ id: 4, method: "users.delete", params: { user_id: "ann" } })).type).toBe(
      "result",
    );
    expect(filesHolding(join(dir.path, "data"), SECRET)).toEqual([]);
    await core.request({ id: 5, method: "shutdown" });
    expect(await core.exited()).toBe(0);
    expect(filesHolding(join(dir.path, "data"), SECRET)).toEqual([]);
  });

  test("the core's own log, at info, names what happened without quoting the user or the model", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [
        { tool_calls: [{ name: "t__echo", arguments: '{"text": QQW7781}' }] },
        { tool_calls: [{ name: "t__no_such_QQW7781", arguments: "{}" }] },
        { content: "done" },
      ],
      app: ["max_parse_errors: 5"],
    });
    await using core = spawnCore({ cwd: dir.path, env: { ...stack.env, LOCAL_AI_LOG_LEVEL: "info" } });
    const r = await core.request({ id: 1, method: "chat", params: { input: "my code is QQW7781, echo it" } });
    expect(r.result.response).toBe("done");
    await core.request({ id: 2, method: "shutdown" });
    expect(await core.exited()).toBe(0);
    expect(core.stderr).toContain("malformed tool call (1)");
    expect(core.stderr).toContain("malformed tool call (2)");
    expect(core.stderr).not.toContain("QQW7781");
  });
});
