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

// A chat's `userId` typo was stripped: the turn was written into the default user's session of
// that id, and memory recalled the default user's notes into another user's reply.
test("a key chat does not know is refused before anything is recalled, sent or stored", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: true } });
  h.llama.script({ content: ["Noted."] });
  await h.chat("a", { input: "my bank pin is 4921", session_id: "private" });
  const asked = h.llama.requests.length;
  h.llama.script({ content: ["Your pin is 4921."] });
  for (const [i, [params, key]] of (
    [
      [{ input: "what is my pin?", session_id: "private", userId: "bob" }, "userId"],
      [{ input: "what is my pin?", userID: "bob" }, "userID"],
    ] as const
  ).entries()) {
    const r = await call(h, `k${i}`, "chat", params);
    expectRefused("chat", r, key);
    expect(h.events(`k${i}`)).toEqual([]);
  }
  // Nothing was sent to the model, and the default user's session is as it was.
  expect(h.llama.requests.length).toBe(asked);
  expect(h.history("private").map((m) => m.content)).toEqual(["my bank pin is 4921", "Noted."]);
  const list = await call(h, "l", "sessions.list", {});
  expect(list.result.sessions).toHaveLength(1);
});

// A misspelled setting was stripped, and the method did what the host did not ask without a word:
// `pull` a revision the host pinned fetched `main`, `embed` a model embedded with the default,
// `models.load` a pin left the model unpinned, `models.unload` a force refused, `plan` a model
// planned the configured one.
test("a key a method that chooses what is done does not know is refused, not dropped", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }] });
  for (const [i, [method, params, key]] of (
    [
      ["pull", { repo: "org/name", quant: "Q4_K_M", rev: "0123abc" }, "rev"],
      ["embed", { input: "hello", modle: "small" }, "modle"],
      ["models.load", { model: "default", pinned: true }, "pinned"],
      ["models.unload", { model: "default", forced: true }, "forced"],
      ["plan", { modelPath: "/models/other.gguf" }, "modelPath"],
    ] as const
  ).entries()) {
    expectRefused(method, await call(h, `s${i}`, method, params), key);
  }
});
