import { expect, test } from "bun:test";
import { REPLY_AGAIN } from "../../src/agent/write-again.ts";
import { ChatHarness } from "./harness.ts";

// A turn the model had to write again keeps the core's request for it as a user message: that
// message is the core's, and regenerate and replace_from take the user's own.
test("regenerate after a re-prompted turn runs the user's question again, not the core's request", async () => {
  await using h = new ChatHarness();
  h.llama.script(
    { unparsed: "<tool_call>\n<function=t__echo>\n</parameter>" },
    { content: ["fine now"] },
    { content: ["answered again"] },
  );
  await h.chat(1, { input: "what is 2+2", session_id: "u" });
  expect(h.history("u").map((m) => m.content)).toEqual([
    "what is 2+2",
    "<tool_call>\n<function=t__echo>\n</parameter>",
    REPLY_AGAIN,
    "fine now",
  ]);
  // The core's request is no message the user can edit.
  const edit = await h.chat(2, { session_id: "u", replace_from: 2, input: "edited" });
  expect(edit.terminal).toMatchObject({
    type: "error",
    code: "invalid_request",
    data: { field: "replace_from" },
  });
  expect(String(edit.terminal.message)).toContain("its user messages: 0)");
  const again = await h.chat(3, { session_id: "u", regenerate: true });
  expect(again.terminal.result).toMatchObject({ response: "answered again" });
  expect(h.history("u")).toEqual([
    { role: "user", content: "what is 2+2" },
    { role: "assistant", content: "answered again" },
  ]);
  const sent = h.llama.requests.at(-1)?.body.messages;
  expect(sent?.map((m: { role: string }) => m.role)).toEqual(["system", "user"]);
});
