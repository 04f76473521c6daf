import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE } from "../../src/store/db/open.ts";
import { eraseSession } from "../../src/store/erase.ts";
import { b64, png } from "../fixtures/images.ts";
import { ChatHarness } from "./harness.ts";

// Two cores on one data folder: another core's sessions.delete (its erase, store/erase.ts, on
// its own connection) aborts only its own turns; a turn here learns of it when it next reads
// or writes the session. A history image it reads then is gone: the turn ends as a text-only
// turn ends at its next write (cancelled, session_deleted, no loop_abort), never as a failure
// of llama-server.

const AGENTS = { agents: [{ name: "a", system_prompt: "Be brief.", tools: [] }] };
const vision = { standIn: () => ({ vision: { tokensPerImage: 64 }, nCtx: 8192 }) };

describe("a history image another core's delete erased while this core's turn ran", () => {
  test("ends the turn as the delete's (cancelled, session_deleted), not as llm_error / server_failed", async () => {
    await using h = new ChatHarness(AGENTS, vision);
    h.llama.script({ content: "A square." }, { content: "never asked" });
    await h.chat(1, { session_id: "s", input: "What is this?", images: [{ data: b64(png(8, 8)) }] });
    // The next turn's first step is about to read the history's image from the store: the
    // other core's delete lands just then.
    h.onEmit = (m) => {
      if (m.id !== 2 || m.event !== "llm_start") return;
      h.onEmit = () => {};
      const other = new Database(join(h.dataDir, DB_FILE));
      // As the other core's connection is opened (store/db/open.ts): its messages go with the session.
      other.exec("PRAGMA busy_timeout = 5000");
      other.exec("PRAGMA foreign_keys = ON");
      other.exec("PRAGMA secure_delete = ON");
      eraseSession(other, "default_user", "s", Date.now());
      other.close();
    };
    const { terminal, events } = await h.chat(2, { session_id: "s", input: "And now?" });
    expect(terminal).toMatchObject({
      type: "error",
      code: "cancelled",
      data: { reason: "session_deleted", session_id: "s" },
    });
    expect(events.filter((e) => e.event === "loop_abort")).toEqual([]);
    expect(h.llama.requests).toHaveLength(1);
    expect(h.history("s")).toEqual([]);
  });
});
