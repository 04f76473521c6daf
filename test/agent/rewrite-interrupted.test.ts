import { expect, test } from "bun:test";
import { ChatHarness } from "./harness.ts";

// sessions.list and sessions.get show a session whose only turn was interrupted: a rewrite of
// it is refused for what it lacks, never session_not_found, on which a host drops the session.
test("regenerate or replace_from of a session with only an interrupted turn is refused by its field", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ error: { status: 500, message: "boom" } }, { content: ["resumed"] });
  await h.chat(1, { input: "q1", session_id: "s" });
  h.send(2, "sessions.get", { session_id: "s" });
  expect((await h.terminal(2)).result).toMatchObject({ session: { session_id: "s" }, messages: [] });
  const regen = await h.chat(3, { session_id: "s", regenerate: true });
  expect(regen.terminal).toMatchObject({
    type: "error",
    code: "invalid_request",
    data: { field: "regenerate" },
  });
  const edit = await h.chat(4, { session_id: "s", replace_from: 0, input: "edited" });
  expect(edit.terminal).toMatchObject({
    type: "error",
    code: "invalid_request",
    data: { field: "replace_from" },
  });
  // Nothing was lost: the interrupted turn resumes.
  const resumed = await h.chat(5, { session_id: "s", resume: true });
  expect(resumed.terminal.result).toMatchObject({ response: "resumed" });
  expect(h.history("s").map((m) => m.content)).toEqual(["q1", "resumed"]);
});
