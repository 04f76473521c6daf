import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readDb } from "../fixtures/read-db.ts";
import { ChatHarness } from "./harness.ts";

// A big memory.folders (docs/agent.md, "Memory") never holds the core: the first chat recalls
// from what is indexed so far and the index goes on in the background, so a ping sent while
// the chat is recalling is answered before the index is done.

const NOTES = 2000;

function bigFolder(dir: string): string {
  const folder = join(dir, "notes");
  mkdirSync(folder);
  for (let i = 0; i < NOTES; i++)
    writeFileSync(join(folder, `n${i}.md`), `Note ${i} about kestrel${i}.\n\n${"filler text ".repeat(300)}`);
  return folder;
}

describe("memory.folders while a chat runs", () => {
  test("a ping sent as the first chat recalls is answered before the index ends; a later chat recalls the folder", async () => {
    await using h = new ChatHarness(
      {
        agents: [{ name: "a", system_prompt: "Be brief." }],
        memory: { enabled: true, top_k: 3, folders: ["./notes"] },
      },
      { standIn: () => ({ unscripted: "echo" }) },
    );
    bigFolder(h.dir.path);
    const indexed = () => {
      const db = readDb(h.services.store().path);
      try {
        return (db.query("SELECT count(*) AS n FROM memory_files").get() as { n: number }).n;
      } finally {
        db.close();
      }
    };
    let atPing: number | undefined;
    h.onEmit = (m) => {
      if (m.event !== "memory_start") return;
      // On the loop's next turn, as a host's ping would come while the chat recalls.
      setTimeout(() => {
        h.send("p", "ping");
        atPing = indexed();
      }, 0);
    };
    const { terminal, events } = await h.chat(1, { session_id: "s1", input: "what about kestrel1999?" });
    expect(terminal.type).toBe("result");
    expect(events.some((e) => e.event === "memory_done")).toBe(true);
    expect((await h.terminal("p")).result).toEqual({ status: "ok" });
    expect(atPing).toBeDefined();
    expect(atPing as number).toBeLessThan(NOTES);
    await h.services.store().folderIndex.start();
    expect(indexed()).toBe(NOTES);
    const later = await h.chat(2, { session_id: "s2", input: "what about kestrel1999?" });
    expect(later.terminal.type).toBe("result");
    const done = later.events.find((e) => e.event === "memory_done");
    expect(done?.hits as number).toBeGreaterThan(0);
  }, 60_000);
});
