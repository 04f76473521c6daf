import { describe, expect, test } from "bun:test";
import { readdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTailHash } from "../../src/models/tail-hash.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const MB = 1024 * 1024;

function descriptorsOpenOn(path: string): number {
  return readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  }).length;
}

// The worker's descriptor belongs to the process, not the thread: a worker ended between its open
// and its close (terminated, or out through an error) left the file open for the life of the core,
// one more per failed or restarted pull. Once `ended` resolves nothing may hold the file.
describe.skipIf(process.platform !== "linux")("the hash worker closes its file on every way out", () => {
  test("stopped while it waits for the writer", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.incomplete");
    writeFileSync(path, Buffer.alloc(2 * MB, 7));
    const hash = startTailHash(path, { written: MB });
    // Reading, then napping for bytes that never come: the file is open.
    while (hash.position() < MB) await Bun.sleep(1);
    expect(descriptorsOpenOn(path)).toBe(1);
    hash.stop();
    await hash.ended();
    expect(descriptorsOpenOn(path)).toBe(0);
  });

  test("failed: the file is shorter than the writer said", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.incomplete");
    writeFileSync(path, Buffer.alloc(MB, 7));
    const hash = startTailHash(path, { written: 2 * MB });
    await expect(hash.finish(2 * MB)).rejects.toThrow("the file shrank");
    await hash.ended();
    expect(descriptorsOpenOn(path)).toBe(0);
  });

  test("finished with its digest", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.incomplete");
    writeFileSync(path, Buffer.alloc(MB, 7));
    const hash = startTailHash(path, { written: MB });
    const got = await hash.finish(MB);
    expect(got.sha256).toBe(new Bun.CryptoHasher("sha256").update(Buffer.alloc(MB, 7)).digest("hex"));
    await hash.ended();
    expect(descriptorsOpenOn(path)).toBe(0);
  });
});
