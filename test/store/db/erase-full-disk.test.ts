import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { Store } from "../../../src/store/store.ts";
import { fillDisk, smallDisk } from "../../fixtures/full-disk.ts";

// Erasing on a full disk (docs/agent.md, The store): a real full file system, a tmpfs of a few
// MB, which needs root to mount; where it cannot be mounted the test says so and is skipped.

const disk = smallDisk("6m", "erase-full-disk");
const { path: mount, mounted } = disk;
afterAll(() => disk.dispose());

const holding = (dir: string, marker: string) =>
  fs.readdirSync(dir).filter((f) => fs.readFileSync(join(dir, f)).includes(Buffer.from(marker)));

describe("erasing on a full disk", () => {
  test.skipIf(!mounted)("users.delete and sessions.delete succeed on a disk with no byte free", async () => {
    const dataDir = join(mount, "data");
    const first = Store.open(dataDir, { reserveBytes: 1 << 20 });
    for (let i = 0; i < 100; i++) {
      first.conversations.commitTurn({
        userId: i % 10 === 0 ? "bob" : "alice",
        sessionId: `s${i % 5}`,
        agent: "a",
        messages: [
          {
            role: "user",
            content: `${i % 10 === 0 ? "PELICAN" : "ZEBRAFISH"} ${i} ${"filler words ".repeat(90)}`,
          },
          { role: "assistant", content: `noted ${i}` },
        ],
        memoryText: `memory of ${i % 10 === 0 ? "PELICAN" : "ZEBRAFISH"} ${i}`,
        at: new Date(),
      });
    }
    // Closed and opened again: the log is folded in and gone, so any write must grow a file.
    first.close();
    const store = Store.open(dataDir, { reserveBytes: 1 << 20 });
    fillDisk(join(mount, "filler"));
    try {
      await eraseOnFullDisk(store, dataDir);
    } finally {
      store.close();
    }
  });
});

async function eraseOnFullDisk(store: Store, dataDir: string): Promise<void> {
  // Full: an ordinary write is refused.
  expect(() =>
    store.conversations.commitTurn({
      userId: "carol",
      sessionId: "c",
      agent: "a",
      messages: [{ role: "user", content: "x".repeat(200_000) }],
      at: new Date(),
    }),
  ).toThrow();
  expect((await store.deleteSession("bob", "s0")).deleted).toBe(true);
  expect((await store.deleteUser("alice")).deleted_sessions).toBe(5);
  expect(holding(dataDir, "ZEBRAFISH")).toEqual([]);
  expect(holding(dataDir, "PELICAN")).toEqual([]);
  expect(store.list("alice", 10).sessions).toEqual([]);
  // The reserve is back once the log is emptied.
  expect(fs.existsSync(join(dataDir, "local-ai.db.reserve"))).toBe(true);
  expect(fs.statSync(join(dataDir, "local-ai.db.reserve")).size).toBe(1 << 20);
}
