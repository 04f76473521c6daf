import { expect, test } from "bun:test";
import { truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_IMAGE_BYTES } from "../../src/images/limits.ts";
import { b64, png } from "../fixtures/images.ts";
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

// Two image chats of one session: the second's base64 is sized at once while the first's files
// are still being stat'ed, so it holds its image room first. The first, ahead in the session's
// line but too big to share the room, would wait for it forever while the second waited for the
// first's place: both hang, and every image chat after them.
test("an image chat's room never waits on a later chat of its session that holds room", async () => {
  await using h = new ChatHarness(
    { agents: [{ name: "plain" }], memory: { enabled: false }, app: { data_dir: "./data", max_images: 16 } },
    { standIn: () => ({ vision: { tokensPerImage: 64 } }) },
  );
  h.llama.script({ content: ["seen"] });
  // 13 files of 20 MB (sparse): more than the held-image room, so they go only when it is empty.
  const paths = Array.from({ length: 13 }, (_, i) => {
    const file = join(h.dir.path, `big-${i}.png`);
    writeFileSync(file, "");
    truncateSync(file, MAX_IMAGE_BYTES);
    return { path: file };
  });
  h.send("big", "chat", { session_id: "s", input: "q1", images: paths });
  h.send("small", "chat", { session_id: "s", input: "q2", images: [{ data: b64(png(8, 8)) }] });
  const [big, small] = await Promise.all([h.terminal("big", 5_000), h.terminal("small", 5_000)]);
  expect(big.type).toBe("error");
  expect(small.result).toMatchObject({ response: "seen" });
}, 15_000);
