import { expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { eraseImported } from "../../src/store/import-v01-erase.ts";
import { runV01 } from "../../src/store/import-v01-run.ts";
import { renameOnto, swappingInsideOpen, thrownWhileSwapped } from "../fixtures/swap-in-open.ts";
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

// The same swap in the session's folder (scrub-tree.ts removeFile): its plain Error crossed the
// store's thread as an unexpected one, so the host read "internal error" with no file named and
// no problem code, the core's log holding its stack. Now a data_dir problem naming the file.
test("a session's 0.1 file swapped under each open fails the delete naming the file and ECHANGED", async () => {
  using dir = tmpdir();
  const session = join(dir.path, "users", "ann", "sessions", "trip");
  fs.mkdirSync(session, { recursive: true });
  const file = join(session, "history.json");
  fs.writeFileSync(file, "secret 0");
  const erase = { kind: "erase", dataDir: dir.path, userId: "ann", sessionId: "trip" } as const;
  const { swaps, thrown } = await thrownWhileSwapped(file, () => runV01(undefined as never, erase));
  expect(swaps).toBe(3);
  expect(fs.readFileSync(file, "utf8")).toBe("secret 3");
  expect(thrown).toBeInstanceOf(CoreError);
  const e = thrown as CoreError;
  expect(e.code).toBe("internal_error");
  expect(e.message).toContain(file);
  expect(e.message).toContain("replaced by another file each time it was opened");
  expect(e.data).toMatchObject({ key: "app.data_dir", path: dir.path, file, problem: "ECHANGED" });
});
