import { expect, test } from "bun:test";
import { CheckpointSchema } from "../../../src/store/checkpoint.ts";
import { HistorySchema } from "../../../src/store/import-v01.ts";

/**
 * What a 0.1 file costs to import, bounded (docs/agent.md, "Import of the 0.1 layout"): read
 * whole and parsed in the core's own process at every start until it is imported, a file that
 * took gigabytes had the core killed at each start, a loop the host could not get out of.
 */

test("a 0.1 history of many bad messages gives one issue, not one per message", () => {
  // z.array kept an issue (~400 bytes) per element: 10 MiB of `1,` took 2 GB, 256 MiB far more.
  const bad = Array.from({ length: 1000 }, () => 1);
  const history = HistorySchema.safeParse({ version: 1, messages: bad });
  expect(history.success).toBe(false);
  expect(history.error?.issues).toHaveLength(1);
  expect(history.error?.issues[0]?.path).toEqual(["messages", 0]);
  const cp = CheckpointSchema.safeParse({
    version: 1,
    trace_id: "t",
    user_input: "hi",
    agent: "a",
    step: 0,
    parse_errors: 0,
    best_text: "",
    turn: [{ role: "user", content: "hi" }, ...bad],
    updated_at: "2026-01-01T00:00:00Z",
  });
  expect(cp.error?.issues).toHaveLength(1);
  // Where it is, as a resume's warning says (agent/turn/session.ts).
  expect(cp.error?.issues[0]?.path).toEqual(["turn", 1]);
});

test("good messages still parse, each as its schema leaves it", () => {
  const messages = [
    { role: "user", content: "hi", extra: "dropped" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }],
    },
    { role: "tool", tool_call_id: "c", content: "ok" },
  ];
  expect(HistorySchema.parse({ version: 1, messages }).messages).toEqual([
    { role: "user", content: "hi" },
    messages[1] as never,
    messages[2] as never,
  ]);
});
