import { expect, spyOn, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import type { PromptRecord } from "../../../src/agent/kv/prompt-record.ts";
import { PromptReuse } from "../../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../../src/config/schema.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// An erase runs on the main loop (ping and cancel wait behind it). The sessions whose records
// quote what went are taken by name too (a first save has no sidecar): each was its own pass over
// the folder (a listing, every sidecar read), so a document quoted by many sessions, or a memory
// folder file quoted by every user's, held the loop for sessions x files reads.

/** How many times an erase lists the KV folder with `quoting` sessions' records quoting it. */
function listings(quoting: number, erase: (reuse: PromptReuse) => void): number {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 20);
  const reuse = new PromptReuse({
    llama: ConfigSchema.parse({}).llama,
    disk,
    cacheRamBytes: () => 0,
  });
  const records = (reuse as unknown as { records: Map<string, PromptRecord> }).records;
  const note = { seq: 1, text: "a passage", ids: ["document:d#1"], sources: ["document:d", "session:s"] };
  for (let i = 0; i < quoting; i++) records.set(`u/q${i}`, { cut: 0, notes: [note] });
  const listing = spyOn(disk as unknown as { listing(): string[] }, "listing");
  erase(reuse);
  return listing.mock.calls.length;
}

test("documents.delete lists the KV folder as often for 300 quoting sessions as for 1", () => {
  const erase = (reuse: PromptReuse) => reuse.forgetSource("u", "document:d");
  expect(listings(300, erase)).toBe(listings(1, erase));
});

test("sessions.delete lists the KV folder as often for 300 sessions quoting it as for 1", () => {
  const erase = (reuse: PromptReuse) => reuse.forget("u", "s");
  expect(listings(300, erase)).toBe(listings(1, erase));
});
