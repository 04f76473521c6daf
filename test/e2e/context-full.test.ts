import { describe, expect, test } from "bun:test";
import { Store } from "../../src/store/store.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 10 item 1, through the compiled binary with the default config (no model.max_tokens):
// the stand-in stops a reply when prompt + reply reach its context (transcript 23b) and answers
// a prompt over it with 400 exceed_context_size_error (transcript 22b).
const onPosix = process.platform !== "win32";

describe.skipIf(!onPosix)("a full context through the compiled binary", () => {
  test("a reply that fills the slot is a result with context_full; a prompt that cannot fit is refused", async () => {
    await using dir = tmpdir();
    const endless = Array.from({ length: 3000 }, (_, i) => `w${i}`).join(" ");
    const stack = writeStack(dir.path, { script: [{ content: endless, chunk_delay_ms: 0 }] });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });

    const full = await core.request({ id: 1, method: "chat", params: { input: "talk", session_id: "s" } });
    expect(full.type).toBe("result");
    const response: string = full.result.response;
    expect(response.length).toBeGreaterThan(1000);
    expect(endless.startsWith(response)).toBe(true);
    expect(response.length).toBeLessThan(endless.length);
    expect(full.result.warnings).toEqual([
      { code: "context_full", message: expect.stringContaining("2048 tokens per slot") },
    ]);
    const ev = core.messages.filter((m) => m.id === 1 && m.type === "event");
    expect(ev.at(-1)).toMatchObject({ event: "final", response });
    // Read beside the running core, as a second process on the data folder may.
    const store = Store.open(stack.dataDir);
    const history = store.conversations.history("default_user", "s");
    expect(history).toEqual([
      { role: "user", content: "talk" },
      { role: "assistant", content: response },
    ]);

    const paste = "lorem ipsum ".repeat(1000);
    const refused = await core.request({ id: 2, method: "chat", params: { input: paste, session_id: "s" } });
    expect(refused).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { reason: "context_overflow", n_ctx: 2048 },
    });
    expect(refused.data.n_prompt_tokens).toBeGreaterThan(2048);
    expect(store.conversations.history("default_user", "s")).toEqual(history);
    expect(store.conversations.checkpoint("default_user", "s")).toBeUndefined();
    store.close();

    // The session goes on: the long turn is left out of the prompt, the next answer is normal.
    const next = await core.request({ id: 3, method: "chat", params: { input: "hi", session_id: "s" } });
    expect(next.result).toMatchObject({ response: "You said: hi", warnings: [] });
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  }, 30_000);
});
