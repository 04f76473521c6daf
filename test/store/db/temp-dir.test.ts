import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openStore } from "../../../src/store/db/open.ts";
import { tempDirectory } from "../../../src/store/db/temp-dir.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// docs/agent.md, "Erasing": an erase's VACUUM builds a copy of the live rows in a temporary
// database, which must stay in the data folder rather than the OS's temp folder (another file
// system, perhaps unencrypted or small); every other statement's temporary data stays in memory,
// so a full data disk does not fail it (test/documents/add-full-disk.test.ts).
describe("SQLite's temporary data", () => {
  test("files in the data folder, tables in memory, once the store is open", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    const opened = openStore(data);
    try {
      expect(tempDirectory(opened.db)).toBe(data);
      expect((opened.db.query("PRAGMA temp_store").get() as { temp_store: number }).temp_store).toBe(2);
    } finally {
      opened.db.close();
    }
  });

  const strace = Bun.which("strace");
  const ROOT = join(import.meta.dir, "../../..");
  /** The temporary files a child opens running `body` on an open store (strace -e openat). */
  async function tempFilesOf(body: string): Promise<{ data: string; opens: string[] }> {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    const script = join(dir.path, "child.ts");
    await Bun.write(
      script,
      `import { openStore } from ${JSON.stringify(join(ROOT, "src/store/db/open.ts"))};
import { settleErase } from ${JSON.stringify(join(ROOT, "src/store/erase.ts"))};
const { db } = openStore(${JSON.stringify(data)});
db.run("CREATE TABLE filler (x BLOB, n INTEGER)");
for (let i = 0; i < 40; i++) db.run("INSERT INTO filler VALUES (randomblob(100000), random())");
db.run("DELETE FROM filler WHERE rowid % 2 = 0");
${body}
db.close();
void settleErase;
`,
    );
    const trace = join(dir.path, "trace.txt");
    const run = Bun.spawnSync([strace!, "-f", "-e", "trace=openat", "-o", trace, process.execPath, script], {
      stderr: "pipe",
    });
    expect(run.stderr.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    const opens = readFileSync(trace, "utf8")
      .split("\n")
      .filter((l) => l.includes("O_TMPFILE") || l.includes("etilqs_"));
    return { data, opens };
  }

  // Seen from outside (strace, Linux; said so when absent).
  test.skipIf(process.platform !== "linux" || !strace)(
    "an explicit erase's page rewrite makes its copy in the data folder, not /var/tmp",
    async () => {
      const { data, opens } = await tempFilesOf("settleErase(db, true);");
      expect(opens.length).toBeGreaterThan(0);
      for (const line of opens) expect(line).toContain(`"${data}`);
    },
    30_000,
  );

  test.skipIf(process.platform !== "linux" || !strace)(
    "a statement's own temporary b-tree (a sort of every row) opens no file at all",
    async () => {
      const { opens } = await tempFilesOf('db.query("SELECT DISTINCT x FROM filler ORDER BY n, x").all();');
      expect(opens).toEqual([]);
    },
    30_000,
  );
});
