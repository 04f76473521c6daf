import { expect, test } from "bun:test";
import { mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { type HeldFile, holdOpen } from "../fixtures/held-file.ts";

// A session erased while an export of it to a file is under way (docs/protocol.md,
// sessions.export; docs/agent.md "Files of erased words are zeroed before they go"): the export
// fails `session_not_found` at its next slice, and its temp file in the host's folder, which held
// the slices written so far, is zeroed on the disk and gone. Through the method, not the compiled
// core, whose erase races the export's end (test/e2e/erased-interrupted.test.ts).
test("a session erased under its export to a file: the export fails and its temp file is zeroed and gone", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const store = h.services.store();
  // Over one slice (about 1 MiB of messages) each, so the export yields between reads.
  for (let i = 0; i < 4; i++)
    store.conversations.commitTurn({
      userId: "default_user",
      sessionId: "s",
      agent: "plain",
      messages: [
        { role: "user", content: `QZEXPERASED7 ${i} ${"x".repeat(600_000)}` },
        { role: "assistant", content: "answer" },
      ],
      at: new Date(),
    });
  const out = join(h.dataDir, "..", "out");
  mkdirSync(out);
  let held: HeldFile | undefined;
  const exportPieces = store.exportPieces.bind(store);
  store.exportPieces = (u, s, f) => {
    const pieces = exportPieces(u, s, f);
    const next = pieces.next.bind(pieces);
    let given = 0;
    pieces.next = async () => {
      const r = await next();
      // The first slice is written by now: its temp file holds the words, then the erase.
      if (++given === 3) {
        const tmp = readdirSync(out).find((n) => n.endsWith(".tmp"));
        held = holdOpen(join(out, tmp as string));
        expect(held.read().includes("QZEXPERASED7")).toBe(true);
        await store.deleteSession("default_user", "s");
      }
      return r;
    };
    return pieces;
  };
  h.send("e", "sessions.export", { session_id: "s", format: "json", path: join(out, "s.json") });
  const done = (await h.terminal("e")) as Msg;
  expect(done).toMatchObject({ type: "error", data: { reason: "session_not_found" } });
  expect(readdirSync(out)).toEqual([]);
  using blocks = held as HeldFile;
  const { size, allZero } = blocks.zeroed();
  expect(size).toBeGreaterThan(0);
  expect(allZero).toBe(true);
});
