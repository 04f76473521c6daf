import { expect, test } from "bun:test";
import { ChatHarness } from "./harness.ts";

/**
 * Two chats of session `s` sent 20 ms apart while a start is under way: the first lets the spawn
 * go first (run-turn.ts, up to 250 ms); the second finds the server starting and waits for none.
 */
async function coldPair(h: ChatHarness, first: Record<string, unknown>, second: Record<string, unknown>) {
  h.provider.nextPrestart = { spawned: new Promise(() => {}) };
  h.send("a", "chat", { session_id: "s", ...first });
  await Bun.sleep(20);
  h.send("b", "chat", { session_id: "s", ...second });
  return Promise.all([h.terminal("a"), h.terminal("b")]);
}

// Chats on one session run one after the other in the order they came (docs/agent.md): the
// second, answered first, would be stored before the question it follows and lack it.
test("on a cold start, two chats of one session sent back to back run in the order sent", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ content: ["answer one"] }, { content: ["answer two"] });
  const [one, two] = await coldPair(h, { input: "q1" }, { input: "q2" });
  expect(one.result).toMatchObject({ response: "answer one" });
  expect(two.result).toMatchObject({ response: "answer two" });
  expect(h.history("s").map((m) => m.content)).toEqual(["q1", "answer one", "q2", "answer two"]);
});

// Run after it, a regenerate would replace the later chat's answer, not the one the host meant.
test("a chat of the session sent while a regenerate waits for the spawn runs after it", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ content: ["first answer"] }, { content: ["regenerated"] }, { content: ["second answer"] });
  await h.chat(1, { input: "q1", session_id: "s" });
  const [regen, plain] = await coldPair(h, { regenerate: true }, { input: "q2" });
  expect(regen.result).toMatchObject({ response: "regenerated" });
  expect(plain.result).toMatchObject({ response: "second answer" });
  expect(h.history("s").map((m) => m.content)).toEqual(["q1", "regenerated", "q2", "second answer"]);
});
