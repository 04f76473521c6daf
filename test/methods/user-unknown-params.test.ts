import { expect, test } from "bun:test";
import { ChatHarness, type Msg } from "../agent/harness.ts";

async function call(h: ChatHarness, id: string, method: string, params: Record<string, unknown>) {
  h.send(id, method, params);
  return (await h.terminal(id)) as Msg & { result?: any; data?: any; message: string };
}

/** The refusal a key the method does not know gets: invalid_request naming the key itself. */
function expectRefused(method: string, r: Msg & { data?: any; message: string }, key: string) {
  expect({ method, r }).toMatchObject({ method, r: { type: "error", code: "invalid_request" } });
  expect(r.message).toContain(key);
  expect(r.data?.field).toBe(key);
}

// As sessions-unknown-params.test.ts: a host spelling `user_id` as JavaScript does (`userId`) sent
// a key documents.* did not know; stripped, the user was `default_user`, so another user's app
// listed, filled and erased the default user's library.
test("a key a documents method does not know is refused, never read as the default user", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: true } });
  const added = await call(h, "a", "documents.add", { text: "my bank pin is 4921", name: "pins" });
  const document_id = added.result.document_id;
  for (const [i, [method, params, key]] of (
    [
      ["documents.list", { userId: "bob" }, "userId"],
      ["documents.add", { text: "bob's note", userId: "bob" }, "userId"],
      ["documents.delete", { document_id, userId: "bob" }, "userId"],
      ["documents.delete", { document_id, user: "bob" }, "user"],
    ] as const
  ).entries()) {
    expectRefused(method, await call(h, `k${i}`, method, params), key);
  }
  // The default user's library is as it was: the one document, not erased, nothing added.
  const list = await call(h, "l", "documents.list", {});
  expect(list.result.documents.map((d: { name: string }) => d.name)).toEqual(["pins"]);
});
