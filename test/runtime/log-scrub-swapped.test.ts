import { expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REDACTED_MARK, redactEarlierLogs } from "../../src/runtime/log-scrub.ts";
import { renameOnto, swappingInsideOpen } from "../fixtures/swap-in-open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A name swapped under each of the three opens (another core's log rotation renaming onto it):
// openToZero took that for "cannot be opened", and the earlier log was renamed over or removed
// UNZEROED, its quoted replies left in the blocks (docs/agent.md, "Files of erased words are
// zeroed before they go"). Left in place instead, the folder unmarked for the next start.

const QUOTED =
  "0.04.631.360 W common_chat_peg_parse: unparsed peg-native output: Dear Dr Ames,\nmy account is ZQX-4417\n";

const text = (n: number) => `${n} ${QUOTED}`;

/** `logs/name` holding QUOTED, and the pass run with `swapped` renamed onto under each open: the swaps. */
function logWith(dir: string, name: string, size?: number) {
  const logs = join(dir, "logs");
  mkdirSync(logs);
  const log = join(logs, name);
  writeFileSync(log, QUOTED);
  if (size !== undefined) truncateSync(log, size);
  const pass = (swapped: string) =>
    swappingInsideOpen(swapped, renameOnto(swapped, text), () => redactEarlierLogs(logs));
  return { logs, log, pass };
}

test("a log whose name is swapped under each open is left, not renamed over unzeroed", async () => {
  await using dir = tmpdir();
  const { logs, log, pass } = logWith(dir.path, "llama-server.log.1");
  expect(await pass(log)).toBe(3);
  // The last file renamed there is left as it was (its writer's), and the pass is tried again.
  expect(readFileSync(log, "utf8")).toBe(text(3));
  expect(existsSync(join(logs, REDACTED_MARK))).toBe(false);
});

test("one too large to read whose name is swapped under each open is left, not removed unzeroed", async () => {
  await using dir = tmpdir();
  const { logs, log, pass } = logWith(dir.path, "llama-server.log.2", 65 * 1024 * 1024);
  const aside = `${log}.zeroing`;
  expect(await pass(aside)).toBe(3);
  expect(readdirSync(logs)).toEqual(["llama-server.log.2.zeroing"]);
  expect(readFileSync(aside, "utf8")).toBe(text(3));
  expect(existsSync(join(logs, REDACTED_MARK))).toBe(false);
});
