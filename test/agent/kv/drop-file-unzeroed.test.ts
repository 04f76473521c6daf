import { afterEach, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { dropFile, Zeroes } from "../../../src/agent/kv/drop-file.ts";
import { logger } from "../../../src/util/logger.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// docs/agent.md (The store): a file the core cannot open for writing is removed all the same,
// logged, so that its blocks still holding the words is known. dropFile removed a KV state file it
// could not open without a word. Root opens any file for writing, save one being run (ETXTBSY, on
// Linux): a copy of `sleep` stands in for such a file.
const restore: Array<() => void> = [];
afterEach(() => {
  for (const r of restore.splice(0)) r();
});

test.skipIf(process.platform !== "linux")("a KV file removed unzeroed is logged", async () => {
  using dir = tmpdir();
  const path = join(dir.path, `s-${"a".repeat(32)}.bin`);
  fs.copyFileSync("/bin/sleep", path);
  fs.chmodSync(path, 0o700);
  const running = Bun.spawn([path, "30"]);
  restore.push(() => running.kill());
  // Running once its image is the file (posix_spawn returns after the exec; made sure of here).
  const exe = () => fs.readlinkSync(`/proc/${running.pid}/exe`);
  while (exe() !== path) await Bun.sleep(0);
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  restore.push(() => warn.mockRestore());
  expect(dropFile(path, new Zeroes())).toBe(true);
  expect(fs.existsSync(path)).toBe(false);
  expect(lines.some((l) => l.includes(path) && l.includes("not zeroed"))).toBe(true);
});
