import { expect, spyOn, test } from "bun:test";
import { statusError } from "../../src/llama/errors.ts";
import { NOT_LOGGED } from "../../src/runtime/log-redact.ts";
import { MemoryEmbedder } from "../../src/store/memory-embedder.ts";
import { Store } from "../../src/store/store.ts";
import { logger } from "../../src/util/logger.ts";
import { commitNotedTurn } from "../fixtures/noted-turn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A row's embedding request carries a remembered turn (or a document's chunk); llama-server's 500
// for a body its parser stopped in quotes what it last read (nlohmann's `last read: '…'`, the
// shape test/runtime/log-redact.test.ts "withoutQuotes" records). The embedder's warning put it
// in the log as it was: the turn kept in data_dir/logs past sessions.delete (docs/protocol.md:
// logs at info and above never quote a conversation).

const QUOTING = statusError(
  500,
  "Internal Server Error",
  JSON.stringify({
    error: {
      code: 500,
      message: `[json.exception.parse_error.101] parse error at line 1, column 30: syntax error while parsing value - invalid string: missing closing quote; last read: '"my AARDVARK diagnosis'`,
      type: "server_error",
    },
  }),
);

function setup() {
  const dir = tmpdir();
  const store = Store.open(dir.path);
  commitNotedTurn(store, "ann", "s", "my AARDVARK diagnosis");
  const job = new MemoryEmbedder({
    store,
    model: "embed",
    fingerprint: () => "m1",
    embed: async () => {
      throw QUOTING;
    },
    batch: 2,
    settleMs: 1,
    // Its retry is not this test's: far off, and stopped before it comes.
    retryMs: { initial: 60_000, max: 60_000 },
  });
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  return {
    store,
    job,
    lines,
    [Symbol.asyncDispose]: async () => {
      warn.mockRestore();
      await job.stop();
      store.close();
      dir[Symbol.dispose]();
    },
  };
}

function expectNoQuote(lines: string[]): void {
  expect(lines).toHaveLength(1);
  expect(lines[0]).toContain(`last read: ${NOT_LOGGED}`);
  expect(lines[0]).not.toMatch(/AARDVARK|diagnosis/);
}

test("the background run's warning for a 500 quoting a row holds no quoted words", async () => {
  await using s = setup();
  await s.job.run();
  expectNoQuote(s.lines);
});

test("embedChunks' warning for a 500 quoting a chunk holds no quoted words", async () => {
  await using s = setup();
  const ids = s.store.memory.search("ann", "AARDVARK", 5).map((h) => Number(h.doc.id));
  await s.job.embedChunks(ids, () => {}, new AbortController().signal);
  expectNoQuote(s.lines);
});
