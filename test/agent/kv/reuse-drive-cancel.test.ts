import { expect, spyOn, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { drives } from "../../../src/util/drive-answers.ts";
import { writeFakeModel } from "../../fixtures/llama-stand-in/binary.ts";
import { ChatHarness } from "../harness.ts";

// A turn's restore asks whether the model file is still the one its server loaded, by a stat off
// the loop (launch.ts changedFileNow). With the model's network mount gone dead that stat hangs:
// a cancel of the chat must answer `cancelled` at once, not once the drive's 30 s wait is over.

test("a chat cancelled while its model file's stat hangs answers cancelled at once", async () => {
  let model = "";
  await using h = new ChatHarness(
    { agents: [{ name: "a", system_prompt: "Be brief." }], memory: { enabled: false } },
    {
      slots: 1,
      standIn: (dir) => {
        const kv = join(dir, "data", "kv");
        mkdirSync(kv, { recursive: true });
        model = writeFakeModel(dir);
        return { modelPath: model, slotSavePath: `${kv}/`, slots: 1, unscripted: "echo" };
      },
    },
  );
  const first = await h.chat("c1", { session_id: "s", input: "a first question" });
  expect(first.terminal.type).toBe("result");
  const asked = Promise.withResolvers<void>();
  // The drive never answers (its wait is not reached in this test either).
  const statOf = spyOn(drives, "statOf").mockImplementation((path: string) => {
    if (path === model) asked.resolve();
    return new Promise(() => {});
  });
  try {
    h.send("c2", "chat", { session_id: "s", input: "a question on a dead mount" });
    await asked.promise;
    h.send("k", "cancel", { request_id: "c2" });
    expect(await h.terminal("c2")).toMatchObject({ type: "error", code: "cancelled" });
  } finally {
    statOf.mockRestore();
  }
});
