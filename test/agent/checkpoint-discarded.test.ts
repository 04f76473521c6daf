import { expect, test } from "bun:test";
import { ChatHarness } from "./harness.ts";

test("the checkpoint_discarded warning quotes the interrupted input cut between characters", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }] });
  // The 60th UTF-16 unit is the first half of an emoji.
  const input = `${"a".repeat(59)}😀 and more`;
  h.writeCheckpoint("d", {
    version: 1,
    trace_id: "0000000000000000",
    user_input: input,
    agent: "plain",
    step: 0,
    parse_errors: 0,
    best_text: "",
    turn: [{ role: "user", content: input }],
    updated_at: "2026-01-01T00:00:00.000Z",
  });
  h.llama.script({ content: ["fresh"] });
  const { terminal } = await h.chat(1, { input: "something else", session_id: "d" });
  const warning = (terminal.result as { warnings: { code: string; message: string }[] }).warnings[0];
  expect(warning?.code).toBe("checkpoint_discarded");
  // A lone surrogate is no text: a host's strict JSON parser refuses the whole result line.
  expect(warning?.message.isWellFormed()).toBe(true);
  expect(warning?.message).toContain(`("${"a".repeat(59)}…")`);
});
