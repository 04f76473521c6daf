import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileStamp } from "../../../src/store/db/file-stamp.ts";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/** Our database with two pages in its middle overwritten: its schema reads, `quick_check` fails. */
function damagedInside(dir: string): string {
  openStore(dir, { withoutFts: true }).db.close();
  const path = join(dir, DB_FILE);
  const db = new Database(path);
  db.run("CREATE TABLE filler (x TEXT)");
  const add = db.query("INSERT INTO filler VALUES (?)");
  db.transaction(() => {
    for (let i = 0; i < 400; i++) add.run(`row ${i} ${"pad ".repeat(50)}`);
  })();
  db.close();
  const bytes = readFileSync(path);
  bytes.fill(0xa5, 10 * 4096, 12 * 4096);
  writeFileSync(path, bytes);
  return path;
}

// After a migration on the thread, a file up to 16 MiB was read whole twice (`quick_check` on
// the thread, then again at the main loop's open, ~6 ms a MiB on the loop). Told the file the
// thread checked, the main open reads it by its schema; a file changed since is read whole.
test("the main open skips quick_check on the very file the thread just checked, not on a changed one", () => {
  using dir = tmpdir();
  const path = damagedInside(dir.path);
  // Stands in for the thread's stamp of the same file (what the damage cannot show: it is the
  // skip that is observed, the check that would have found it left out).
  const skipped = openStore(dir.path, { withoutFts: true, checkedAhead: fileStamp(path) });
  skipped.db.close(false);
  expect(skipped.resetFrom).toBeUndefined();
  expect(skipped.checked).toBe(false);

  const stamp = fileStamp(path);
  utimesSync(path, new Date(), new Date(Date.now() + 5000));
  const changed = openStore(dir.path, { withoutFts: true, checkedAhead: stamp });
  changed.db.close(false);
  expect(changed.resetFrom).toContain(".corrupt-");
});
