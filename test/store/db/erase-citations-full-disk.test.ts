import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { fillDisk, smallDisk } from "../../fixtures/full-disk.ts";

// sessions.delete on a full disk (store/erase.ts eraseInSteps) of a session that many answers
// cite: dropping those citations rewrites a page per answer, which one step's log must hold.

const disk = smallDisk("24m", "erase-citations-full-disk");
afterAll(() => disk.dispose());

describe("erasing a much-cited session on a full disk", () => {
  test.skipIf(!disk.mounted)("the delete succeeds and no answer cites it after", async () => {
    const dataDir = join(disk.path, "data");
    const reserveBytes = 1 << 20;
    const first = Store.open(dataDir, { reserveBytes });
    const turn = (sessionId: string, answer: string, cites: boolean) =>
      first.conversations.commitTurn({
        userId: "bob",
        sessionId,
        agent: "a",
        messages: [
          { role: "user", content: `question in ${sessionId}` },
          {
            role: "assistant",
            content: answer,
            ...(cites ? { sources: [{ kind: "turn" as const, id: "x", name: "", chunk: 0, score: 1 }] } : {}),
          },
        ],
        memoryText: `memory of ${sessionId}`,
        at: new Date(),
      });
    turn("x", "the cited conversation", false);
    // Each answer about a page of its own: more pages than the reserve's log can take at once.
    const pages = reserveBytes / 4096;
    for (let i = 0; i < pages * 2; i++) turn(`y${i % 8}`, `answer ${i} ${"words ".repeat(600)}`, true);
    first.close();
    const store = Store.open(dataDir, { reserveBytes });
    fillDisk(join(disk.path, "filler"));
    try {
      expect((await store.deleteSession("bob", "x")).deleted).toBe(true);
      for (let i = 0; i < 8; i++) {
        const cited = store.get("bob", `y${i}`, 1000).messages.filter((m) => m.sources !== undefined);
        expect(cited).toEqual([]);
      }
    } finally {
      store.close();
    }
  });
});
