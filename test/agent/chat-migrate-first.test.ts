import { describe, expect, test } from "bun:test";
import { SCHEMA_VERSION } from "../../src/store/db/migrations.ts";
import { olderDatabase, schemaVersion } from "../fixtures/older-database.ts";
import { ChatHarness } from "./harness.ts";

// A chat's turn opens the store at once (no await before it): reached while the read-ahead's
// migration ran on its thread, it was refused `migrating` though the host had done nothing wrong
// (docs/agent.md, The store, "Migrations off the loop").
describe("chat: an older database's migrations", () => {
  test("a chat sent while they run on their thread waits for them, then runs", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    olderDatabase(h.dataDir, 20);
    const migrating = h.services.storeReady();
    expect(h.services.storeWait()).toBe(migrating);
    h.llama.script({ content: ["after the upgrade"] });
    const { terminal } = await h.chat("1", { input: "hello", session_id: "s0" });
    expect(terminal.type).toBe("result");
    expect(schemaVersion(h.dataDir)).toBe(SCHEMA_VERSION);
    expect(h.history("s0").at(-1)).toEqual({ role: "assistant", content: "after the upgrade" });
  });
});
