import { describe, expect, test } from "bun:test";
import type { CoreError } from "../../src/protocol/errors.ts";
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

  test("memory's index is asked for once the store opens, not refused while they run", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }] });
    olderDatabase(h.dataDir, 20);
    // As the core's memoryIndex: made over the store, or undefined (caught) when it cannot open.
    // Asked only while the migration ran, the first chat after an upgrade recalled without vectors.
    const asked: string[] = [];
    h.services.memoryIndex = () => {
      try {
        h.services.store();
        asked.push("opened");
      } catch (err) {
        asked.push(String((err as CoreError).data?.problem));
      }
      return undefined;
    };
    h.services.storeReady();
    h.llama.script({ content: ["after the upgrade"] });
    const { terminal } = await h.chat("1", { input: "hello", session_id: "s0" });
    expect(terminal.type).toBe("result");
    expect(asked.at(-1)).toBe("opened");
  });
});
