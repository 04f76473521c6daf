import { expect, test } from "bun:test";
import { MAX_CALLS_PER_STEP } from "../../src/agent/turn/tools.ts";
import { ChatHarness } from "./harness.ts";

// A step that asks for thousands of calls runs a bounded number of them, and a cancel is read
// between calls even when each is answered at once (docs/agent.md#tool-calls).

const notes = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ name: "t__write_note", arguments: { text: `n${i}` } }));

test("calls past the per-step cap are not run, and the model is told so", async () => {
  await using h = new ChatHarness();
  const n = MAX_CALLS_PER_STEP + 36;
  h.llama.script({ tool_calls: notes(n) }, { content: ["done"] });
  const { terminal, events } = await h.chat("c", { input: "x", session_id: "many" });
  expect(terminal.type).toBe("result");
  expect(events.filter((e) => e.event === "tool_start")).toHaveLength(MAX_CALLS_PER_STEP);
  expect(events.filter((e) => e.event === "tool_done" && e.status === "denied")).toHaveLength(
    MAX_CALLS_PER_STEP,
  );
  const second = h.llama.requests[1]?.body as { messages: { role: string; content: string }[] } | undefined;
  const sent = second?.messages ?? [];
  const tools = sent.filter((m) => m.role === "tool");
  expect(tools).toHaveLength(n);
  expect(tools.filter((m) => m.content.startsWith("Not run: a step may make at most"))).toHaveLength(36);
});

test("denied calls, answered at once, still let a cancel in between them", async () => {
  await using h = new ChatHarness();
  // The cancel's module loaded first: the cancel below is read as it arrives, not after an import.
  h.send("warm", "cancel", { request_id: "nobody" });
  expect((await h.terminal("warm")).result).toEqual({ cancelled: false });
  h.llama.script({ tool_calls: notes(MAX_CALLS_PER_STEP) }, { content: ["done"] });
  let sent = false;
  h.onEmit = (m) => {
    if (sent || m.event !== "tool_done") return;
    sent = true;
    // Arrives as stdin would: on a later turn of the event loop, not inside the turn's own work.
    setTimeout(() => h.send("k", "cancel", { request_id: "c" }), 0);
  };
  h.send("c", "chat", { input: "x", session_id: "cancel" });
  const k = await h.terminal("k");
  const c = await h.terminal("c");
  expect(k.result).toEqual({ cancelled: true });
  expect(c.type).toBe("error");
  // Without a turn of the loop between calls, all of them ran before the cancel was read.
  expect(h.events("c").filter((e) => e.event === "tool_done").length).toBeLessThan(MAX_CALLS_PER_STEP / 2);
});
