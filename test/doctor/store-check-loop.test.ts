import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { storeCheck } from "../../src/doctor/store-check.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

/** A healthy database with 64 MiB of pages for `quick_check` to read (hundreds of ms), made in one insert. */
function bigStore(dataDir: string): void {
  Store.open(dataDir).close();
  const db = new Database(join(dataDir, DB_FILE));
  db.run("CREATE TABLE pad (b BLOB)");
  db.run("INSERT INTO pad VALUES (zeroblob(64 * 1024 * 1024))");
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
}

/** The check, and whether the main loop turned (a setImmediate ran) before it settled. */
async function loopTurnsDuring<T>(check: () => T | Promise<T>): Promise<{ value: T; turned: boolean }> {
  let settled = false;
  const running = Promise.resolve(check()).then((value) => {
    settled = true;
    return value;
  });
  // What a ping arriving meanwhile needs: one turn of the loop while the check is still under way.
  const turned = await new Promise<boolean>((resolve) => setImmediate(() => resolve(!settled)));
  return { value: await running, turned };
}

// doctor's `quick_check` reads every page of the database (about 6 ms a megabyte): on the main
// thread, a database of several GB held ping, cancel and the core's stop for seconds.
describe("doctor's store check and the main loop", () => {
  test("the quick_check runs off the loop: the loop turns before it ends; the report is the same", async () => {
    using dir = tmpdir();
    bigStore(dir.path);
    const { value, turned } = await loopTurnsDuring(() => storeCheck(configAt(dir.path)));
    expect(turned).toBe(true);
    expect(value).toMatchObject({
      id: "store",
      status: "ok",
      message: expect.stringContaining("is healthy"),
    });
  });

  // A read that cannot finish in time (a huge file, a slow disk) is not damage: the check warns
  // that it did not finish, and the file is not blamed.
  test("past its limit the check is not finished, a warning, never a damaged file", async () => {
    using dir = tmpdir();
    bigStore(dir.path);
    const c = await storeCheck(configAt(dir.path), true, { limitMs: 0 });
    expect(c).toMatchObject({ id: "store", status: "warn", data: { finished: false } });
    expect(c.message).toContain("did not finish (it took longer than 0 s)");
    expect(c.message).not.toContain("damaged");
  });

  test("the core's stop ends the read: not finished, without waiting for the quick_check", async () => {
    using dir = tmpdir();
    bigStore(dir.path);
    const stopping = new AbortController();
    const check = storeCheck(configAt(dir.path), true, { signal: stopping.signal });
    stopping.abort();
    const c = await check;
    expect(c).toMatchObject({ status: "warn", data: { finished: false } });
    expect(c.message).toContain("the core began to stop");
  });
});
