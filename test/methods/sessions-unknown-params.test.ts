import { expect, test } from "bun:test";
import { ChatHarness, type Msg } from "../agent/harness.ts";

async function call(h: ChatHarness, id: string, method: string, params: Record<string, unknown>) {
  h.send(id, method, params);
  return (await h.terminal(id)) as Msg & { result?: any; data?: any; message: string };
}

// A host that misspells `user_id` (`userId`, as JavaScript names it) sent a key the method does
// not know: stripped, the default user was read, and with users.delete erased for good.
test("a key a conversation method does not know is refused, never read as the default user", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ content: ["Noted."] });
  await h.chat("a", { input: "my bank pin is 4921", session_id: "private" });
  for (const [i, [method, params, key]] of (
    [
      ["sessions.list", { userId: "bob" }, "userId"],
      ["sessions.get", { session_id: "private", userId: "bob" }, "userId"],
      ["sessions.search", { query: "pin", user: "bob" }, "user"],
      ["sessions.export", { session_id: "private", format: "json", userID: "bob" }, "userID"],
      ["sessions.attachment", { id: 1, userId: "bob" }, "userId"],
      ["sessions.rename", { session_id: "private", title: "t", userId: "bob" }, "userId"],
      ["sessions.delete", { session_id: "private", userId: "bob" }, "userId"],
      ["users.delete", { userId: "bob" }, "userId"],
    ] as const
  ).entries()) {
    const r = await call(h, `k${i}`, method, params);
    expect({ method, r }).toMatchObject({ method, r: { type: "error", code: "invalid_request" } });
    expect(r.message).toContain(key);
    expect(r.data?.field).toBe(key);
  }
  // A hostile key is named cut and escaped: the message stays one short line of text.
  const odd = await call(h, "odd", "sessions.list", { [`\ud800\n${"k".repeat(100_000)}`]: 1 });
  expect(odd).toMatchObject({ type: "error", code: "invalid_request" });
  expect(odd.message.length).toBeLessThan(200);
  expect(odd.message.isWellFormed() && !odd.message.includes("\n")).toBe(true);
  expect(odd.data.field).toStartWith("\\ud800\\nkkk");
  // Nothing of the default user's was renamed or erased.
  const got = await call(h, "g", "sessions.get", { session_id: "private" });
  expect(got.result.session.title).toBe("my bank pin is 4921");
  expect(got.result.messages).toHaveLength(2);
});
