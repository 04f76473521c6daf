import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { earlierLogsRedacted, REDACTED_MARK, redactEarlierLogs } from "../../src/runtime/log-scrub.ts";
import { RotatingLog } from "../../src/runtime/log-sink.ts";
import { CoreServices } from "../../src/server/services.ts";
import { holdOpen } from "../fixtures/held-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The one-time pass over an earlier core's logs (log-scrub.ts) zeroes the files it replaces or
// removes. Its zeroing ran on by itself: the `.redacted-2` mark was written before it ended and
// no shutdown waited for it, so a core that exited at once left the quoted replies in the freed
// blocks for good, the folder marked done; and a replaced file of up to 64 MiB was zeroed and
// synced on the event loop, a ping waiting. docs/supervisor.md, "No conversation in the log".
const OLD = [
  "--- 2026-11-30T08:00:00.000Z start /bin/llama-server -m m.gguf (pid 7)",
  "0.04.631.360 W common_chat_peg_parse: unparsed peg-native output: Dear Dr Ames,",
  "my account is ZQX-4417",
  "",
].join("\n");

const zeroed = (b: Buffer) => b.every((x) => x === 0);

/** An earlier log over the 64 MiB the pass reads: removed unread. */
function tooLarge(dir: string, name = "llama-server.log.1"): string {
  const log = join(dir, name);
  writeFileSync(log, OLD, { mode: 0o600 });
  truncateSync(log, 65 * 1024 * 1024);
  return log;
}

function expectZeroedAndGone(dir: string, log: string, blocks: { read: () => Buffer }): void {
  expect(existsSync(log)).toBe(false);
  expect(existsSync(`${log}.zeroing`)).toBe(false);
  expect(zeroed(blocks.read())).toBe(true);
  expect(existsSync(join(dir, REDACTED_MARK))).toBe(true);
}

const HEADER = "--- 2026-12-06T20:00:00.000Z start /bin/llama-server (pid 8)\n";

/** A start's first line written at the live log `log`, the pass then waited out: the line is still there. */
async function startWritesItsLog(dir: string, log: string): Promise<void> {
  // A log_max_bytes above the file's size: the first line is appended, no rotation moves it.
  const sink = new RotatingLog(dir, 128 * 1024 * 1024, 3);
  await earlierLogsRedacted(dir);
  sink.write(HEADER);
  sink.close();
  await redactEarlierLogs(dir);
  expect(readFileSync(log, "utf8")).toBe(HEADER);
}

describe("redactEarlierLogs, waited for", () => {
  test("a file too large to read: the folder is marked done only once it is zeroed and gone", async () => {
    await using dir = tmpdir();
    const log = tooLarge(dir.path);
    using blocks = holdOpen(log);
    const pass = redactEarlierLogs(dir.path);
    expect(existsSync(join(dir.path, REDACTED_MARK))).toBe(false);
    await pass;
    expectZeroedAndGone(dir.path, log, blocks);
  });

  test("a replaced file is zeroed off the event loop, and the shutdown waits for it", async () => {
    await using dir = tmpdir();
    const log = join(dir.path, "llama-server.log");
    writeFileSync(log, OLD, { mode: 0o600 });
    using blocks = holdOpen(log);
    void redactEarlierLogs(dir.path);
    // Written off the loop: nothing of it can have happened before the call returned.
    expect(blocks.read().toString()).toBe(OLD);
    // Replaced (a start waits for this): a shutdown now stops no read, it waits for the zeroing.
    await earlierLogsRedacted(dir.path);
    await new CoreServices({ configPath: "none.yaml", cwd: dir.path }).stop();
    expect(zeroed(blocks.read())).toBe(true);
    expect(existsSync(join(dir.path, REDACTED_MARK))).toBe(true);
  });

  test("a shutdown stops a large file's zeroing at its name, or its read: the next start zeroes it", async () => {
    await using dir = tmpdir();
    const log = tooLarge(dir.path);
    using blocks = holdOpen(log);
    void redactEarlierLogs(dir.path);
    await new CoreServices({ configPath: "none.yaml", cwd: dir.path }).stop();
    // Gone only once zeroed; unmarked while a name holds it (its own, or the one it is zeroed at).
    if (existsSync(log) || existsSync(`${log}.zeroing`))
      expect(existsSync(join(dir.path, REDACTED_MARK))).toBe(false);
    else expect(zeroed(blocks.read())).toBe(true);
    await redactEarlierLogs(dir.path);
    expectZeroedAndGone(dir.path, log, blocks);
  });

  // A core's first start on a folder of an earlier core's logs read and redacted them all in one
  // turn of the event loop: 1.7 s for a 60 MiB file, and up to 100 of them (llama.log_files), a
  // ping waiting. They are read a file and a part of one at a time.
  test("the files are redacted with the event loop turning between", async () => {
    await using dir = tmpdir();
    const logs = ["llama-server.log", "llama-server.log.1"].map((n) => join(dir.path, n));
    for (const log of logs) writeFileSync(log, OLD, { mode: 0o600 });
    const pass = redactEarlierLogs(dir.path);
    expect(logs.map((log) => readFileSync(log, "utf8"))).toEqual([OLD, OLD]);
    await earlierLogsRedacted(dir.path);
    for (const log of logs) expect(readFileSync(log, "utf8")).not.toContain("ZQX-4417");
    await pass;
    expect(existsSync(join(dir.path, REDACTED_MARK))).toBe(true);
  });

  // The live log's own name over 64 MiB (llama.log_max_bytes set above it, or a core from before
  // rotation): a start waits for the rewrites only, then wrote its header and llama-server's first
  // lines into that file, which the pass zeroed and unlinked after: the lines of the very start a
  // user would look at were gone.
  test("a too-large file at the live log's name: the new start's lines are not removed with it", async () => {
    await using dir = tmpdir();
    const log = tooLarge(dir.path, "llama-server.log");
    using blocks = holdOpen(log);
    await startWritesItsLog(dir.path, log);
    expect(zeroed(blocks.read())).toBe(true);
    expect(existsSync(join(dir.path, REDACTED_MARK))).toBe(true);
  });

  // A shutdown stopped an earlier pass's zeroing: its file stays at `<name>.zeroing` and the folder
  // unmarked, so the next pass reads the run's own log again, over 64 MiB with such a
  // log_max_bytes. With the aside name taken the live log was zeroed at its own name, and the new
  // start's lines went with its unlink, as before the set-aside.
  test("a too-large live log with a set-aside file already there: the new start's lines stay", async () => {
    await using dir = tmpdir();
    const stopped = tooLarge(dir.path, "llama-server.log.zeroing");
    using before = holdOpen(stopped);
    const log = tooLarge(dir.path, "llama-server.log");
    using blocks = holdOpen(log);
    await startWritesItsLog(dir.path, log);
    expect(zeroed(blocks.read())).toBe(true);
    expect(zeroed(before.read())).toBe(true);
    expect(readdirSync(dir.path).filter((n) => n.endsWith(".zeroing"))).toEqual([]);
    expect(existsSync(join(dir.path, REDACTED_MARK))).toBe(true);
  });
});
