import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { storeCheck } from "../../src/doctor/store-check.ts";
import { DB_FILE, openStore } from "../../src/store/db/open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

// SQLite's first read opens an existing `-journal` read-only and blocking, looking for a hot
// journal: with a FIFO there doctor's read-only open waited its whole limit (60 s), then said only
// "took longer", its thread left blocked for good; the core refuses it by name (ownership.ts).
describe.skipIf(process.platform === "win32")("doctor: a FIFO at the database's -journal", () => {
  test("named at once as the problem, the file not opened", async () => {
    using dir = tmpdir();
    openStore(dir.path).db.close();
    execFileSync("mkfifo", [join(dir.path, `${DB_FILE}-journal`)]);
    const c = await storeCheck(configAt(dir.path), true, { limitMs: 1000 });
    expect(c).toMatchObject({ id: "store", status: "fail", data: { problem: "a FIFO" } });
    expect(c.message).toContain(`${DB_FILE}-journal`);
  });
});
