import { afterAll, describe, expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";

// A documents.add that fills the disk (docs/agent.md "Documents", "Erasing on a full disk"): its
// chunks stored so far are erased as after any failure, with the store's reserve. Seen through the
// compiled core on a real tmpfs: the discard met the full disk too, the chunks were "left to the
// sweep", which met it again every minute, so the document's text stayed readable in local-ai.db
// and its -wal and every later write failed, the disk full of the failed add itself. A real full
// file system needs root to mount; where it cannot be mounted the test says so and is skipped.

const disk = smallDisk("10m", "add-full-disk");
const { path: mount, mounted } = disk;
afterAll(() => disk.dispose());

/** Paragraphs of many distinct words, each naming `marker`. */
const prose = (paragraphs: number, marker: string) =>
  Array.from(
    { length: paragraphs },
    (_, i) =>
      `${marker} ${i} ${Array.from({ length: 120 }, (_, j) => `w${(i * 7 + j) % 997}x${j}`).join(" ")}.`,
  ).join("\n\n");

describe("documents.add on a disk that fills", () => {
  test.skipIf(!mounted)(
    "its chunks are erased, nothing of it stays readable, and adds work again once there is room",
    async () => {
      const dataDir = join(mount, "data");
      const filler = join(mount, "filler");
      await using h = new ChatHarness({
        agents: [{ name: "plain" }],
        app: { data_dir: dataDir },
        memory: { enabled: true, top_k: 3 },
      });
      const call = async (id: string, params: Record<string, unknown>) => {
        h.send(id, "documents.add", params);
        return (await h.terminal(id)) as Msg & { result?: { chunks: number }; data?: { problem?: string } };
      };
      expect((await call("1", { text: "a kept note about KEPTOSPREY", name: "kept" })).type).toBe("result");
      // The disk filled but for 1 MiB before the add, which is bigger: the add itself fills it,
      // part-way, with nothing else writing beside its discard. (Filling it while the add ran
      // raced the add: a quick machine's add filled the disk first, then the filler took the
      // room the discard's steps had freed.)
      fillDisk(filler, 1 << 20);
      h.send("2", "documents.add", { text: prose(1500, "LOSTOSPREY"), name: "big" });
      // The discard is paced against the full disk (about 9 s alone, more with the suite's other
      // files running beside it): the test's own ceiling, not the harness's 20 s.
      const failed = (await h.terminal("2", 50_000)) as Msg & { data?: { problem?: string } };
      expect(failed).toMatchObject({ type: "error", code: "internal_error" });
      expect(failed.data?.problem).toStartWith("SQLITE_FULL");
      // The removal of what it stored goes on behind the answer (a shutdown waits for it).
      await h.services.store().documents.discarding.idle();
      expect(filesHolding(dataDir, "LOSTOSPREY")).toEqual([]);
      expect(filesHolding(dataDir, "KEPTOSPREY")).toContain("local-ai.db");
      fs.rmSync(filler);
      expect((await call("3", { text: "after the room came back", name: "after" })).type).toBe("result");
    },
    90_000,
  );
});
