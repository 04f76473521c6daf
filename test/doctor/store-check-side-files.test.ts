import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { storeCheck } from "../../src/doctor/store-check.ts";
import { DB_FILE, openStore } from "../../src/store/db/open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

// The core's open refuses a FIFO at `-wal` or `-shm` as at `-journal` (store/db/ownership.ts): one
// at `-wal` it cannot write held its open for good. doctor passed one at `-wal` as ok (its
// read-only open got on with it) and named one at `-shm` only a disk error: now it says which.
describe.skipIf(process.platform === "win32")("doctor: a FIFO at the database's -wal or -shm", () => {
  for (const suffix of ["-wal", "-shm"]) {
    test(`at ${suffix}: named at once as the problem`, async () => {
      using dir = tmpdir();
      openStore(dir.path).db.close();
      const file = join(dir.path, `${DB_FILE}${suffix}`);
      execFileSync("rm", ["-f", file]);
      execFileSync("mkfifo", ["-m", "600", file]);
      const c = await storeCheck(configAt(dir.path), true, { limitMs: 5000 });
      expect(c).toMatchObject({ id: "store", status: "fail", data: { file, problem: "a FIFO" } });
      expect(c.message).toContain(`${DB_FILE}${suffix}`);
    });
  }
});

// The core refuses a FIFO beside the database before it makes a missing one (ownership.ts
// `claimDatabaseFile`): doctor said "no conversation database yet" as ok, and the first chat failed.
describe.skipIf(process.platform === "win32")("doctor: a FIFO beside a database not made yet", () => {
  test("fails as the core's open does, not ok", async () => {
    using dir = tmpdir();
    const file = join(dir.path, `${DB_FILE}-journal`);
    execFileSync("mkfifo", [file]);
    const c = await storeCheck(configAt(dir.path), true, { limitMs: 5000 });
    expect(() => openStore(dir.path)).toThrow(
      expect.objectContaining({ data: expect.objectContaining({ problem: "ENOTFILE" }) }),
    );
    expect(c).toMatchObject({ id: "store", status: "fail", data: { file, problem: "a FIFO" } });
  });
});
