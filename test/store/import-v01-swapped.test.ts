import { expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { eraseImported } from "../../src/store/import-v01-erase.ts";
import { renameOnto, swappingInsideOpen } from "../fixtures/swap-in-open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The 0.1 memory file a session's delete rewrites, its name swapped under each of the three opens
// to zero it (another writer renaming onto it, as 0.1 itself saved): openToZero took that for
// "cannot be opened", and the file renamed there last was replaced UNZEROED, its words kept in
// the blocks (docs/agent.md, "Files of erased words are zeroed before they go"). Now the file is
// left and the delete fails, to be sent again.

const turns = (n: number) =>
  JSON.stringify({
    version: 1,
    turns: [
      { id: "1", session_id: "trip", text: `secret ${n}\nanswer`, at: "2025-01-01" },
      { id: "2", session_id: "other", text: "kept\nanswer", at: "2025-01-01" },
    ],
  });

test("a 0.1 memory file swapped under each open is left, the delete failing, never replaced unzeroed", async () => {
  using dir = tmpdir();
  const memory = join(dir.path, "users", "ann", "memory");
  fs.mkdirSync(memory, { recursive: true });
  const path = join(memory, "turns.json");
  fs.writeFileSync(path, turns(0));
  let thrown: unknown;
  const swaps = await swappingInsideOpen(path, renameOnto(path, turns), () => {
    try {
      eraseImported(dir.path, "ann", "trip");
    } catch (err) {
      thrown = err;
    }
  });
  expect(swaps).toBe(3);
  expect(fs.readFileSync(path, "utf8")).toBe(turns(3));
  expect(thrown).toBeInstanceOf(CoreError);
  expect((thrown as CoreError).message).toContain("replaced by another file each time it was opened");
});
