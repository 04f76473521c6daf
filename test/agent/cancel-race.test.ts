import { describe, expect, test } from "bun:test";
import { ChatHarness, type Msg } from "./harness.ts";

const historyOf = (h: ChatHarness, session: string) => h.history(session);

/** Loads the cancel method once, so a later cancel runs synchronously inside the sender. */
async function warmCancel(h: ChatHarness): Promise<void> {
  h.send("warm", "cancel", { request_id: "nobody" });
  expect((await h.terminal("warm")).result).toEqual({ cancelled: false });
}

describe("chat: a cancel racing the finish", () => {
  test("a cancel that lands just after `final` finds the chat finished: its result follows, committed", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    await warmCancel(h);
    h.llama.script({ content: ["first answer"] });
    await h.chat("c0", { input: "earlier", session_id: "race" });

    h.llama.script({ content: ["the ", "answer"] });
    h.onEmit = (m: Msg) => {
      if (m.id === "c1" && m.event === "final") h.send("k", "cancel", { request_id: "c1" });
    };
    const { terminal, events } = await h.chat("c1", { input: "racing", session_id: "race" });
    expect((await h.terminal("k")).result).toEqual({ cancelled: false });
    expect(terminal).toMatchObject({ type: "result", result: { response: "the answer" } });
    expect(events.at(-1)).toMatchObject({ event: "final", step: 0 });
    expect(events.some((e) => e.event === "loop_abort")).toBe(false);
    expect(historyOf(h, "race").map((m) => m.content)).toEqual([
      "earlier",
      "first answer",
      "racing",
      "the answer",
    ]);
    expect(h.checkpoint("race") !== undefined).toBe(false);
  });

  test("cancels at random moments around the finish: exactly one consistent outcome each time", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
    await warmCancel(h);
    const outcomes = { cancelled: 0, finished: 0 };
    for (let i = 0; i < 12; i++) {
      const session = `r${i}`;
      h.llama.script({ content: ["a", "b", "c"], chunk_delay_ms: 5 });
      h.send(`c${i}`, "chat", { input: `q${i}`, session_id: session });
      // Spread the cancel from mid-stream to just after the finish.
      await Bun.sleep(i * 4);
      h.send(`k${i}`, "cancel", { request_id: `c${i}` });
      const ack = (await h.terminal(`k${i}`)).result as { cancelled: boolean };
      const end = await h.terminal(`c${i}`);
      const evs = h.events(`c${i}`);
      const history = historyOf(h, session);
      if (ack.cancelled) {
        outcomes.cancelled++;
        expect(end).toMatchObject({ type: "error", code: "cancelled" });
        expect(evs.at(-1)).toMatchObject({ event: "loop_abort", reason: "cancelled" });
        expect(evs.some((e) => e.event === "final")).toBe(false);
        expect(history).toEqual([]);
        expect(h.checkpoint(session) !== undefined).toBe(true);
      } else {
        outcomes.finished++;
        expect(end).toMatchObject({ type: "result", result: { response: "abc" } });
        expect(evs.some((e) => e.event === "loop_abort")).toBe(false);
        expect(history.map((m) => m.content)).toEqual([`q${i}`, "abc"]);
        expect(h.checkpoint(session) !== undefined).toBe(false);
      }
    }
    expect(outcomes.cancelled + outcomes.finished).toBe(12);
  }, 60_000);
});

describe("chat: a cancel while the turn waits for the server", () => {
  test("progress the start reports after the cancel is answered is not sent: no warmup_progress follows it", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
    await warmCancel(h);
    // The start hears of the cancel only after it reports its next progress, then rejects.
    h.provider.beforeLease = async (onProgress) => {
      h.send("k", "cancel", { request_id: "c" });
      expect((await h.terminal("k")).result).toEqual({ cancelled: true });
      onProgress?.({ phase: "loading", elapsed_ms: 1 });
    };
    const { terminal, events } = await h.chat("c", { input: "q", session_id: "s" });
    expect(terminal).toMatchObject({ type: "error", code: "cancelled" });
    expect(events.map((e) => e.event)).toEqual(["run_start", "memory_start", "memory_done", "loop_abort"]);
  });
});
