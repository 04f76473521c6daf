import { describe, expect, spyOn, test } from "bun:test";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import type { PreparedImage } from "../../../src/images/prepare.ts";
import { Store } from "../../../src/store/store.ts";
import { logger } from "../../../src/util/logger.ts";
import { png } from "../../fixtures/images.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A photo's pages' rewrite that fails (a full disk, a locked database) stays owed, and the turn
// goes on: but its bytes stay in the database's log until the next erase or start, and an
// operator must be able to tell why. The failure is logged, without the turn's words.

const SECRET = "my secret QSETTLELOG here";
const photo: PreparedImage = { format: "png", mime: "image/png", width: 3, height: 3, data: png(3, 3) };

function begin(store: Store, input: string, images?: PreparedImage[]): () => TurnSession {
  return () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId: "s1" },
      { traceId: "t1", input, agent: "a", resume: false, ...(images ? { images } : {}) },
      [],
      () => new Date(1_000),
    );
}

/** The store's settle failing, and the warnings logged meanwhile, until disposed. */
function settleFails(store: Store): { lines: string[] } & Disposable {
  const lines: string[] = [];
  const settle = spyOn(store, "settleOwed").mockImplementation(() =>
    Promise.reject(new Error("database or disk is full")),
  );
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  return {
    lines,
    [Symbol.dispose]: () => {
      settle.mockRestore();
      warn.mockRestore();
    },
  };
}

/** One warning, naming the store's failure, not the turn's words. */
function loggedOnce(lines: string[]): void {
  expect(lines.length).toBe(1);
  expect(lines[0]).toContain("database or disk is full");
  expect(lines[0]).not.toContain("QSETTLELOG");
}

/** A turn of s1 begun and its first write done, on a store open in a fresh folder. */
async function firstTurn(store: Store, input: string, images?: PreparedImage[]) {
  const leased = await store.lease("u", "s1", AbortSignal.timeout(5000), begin(store, input, images));
  await leased.value.firstWrite(AbortSignal.timeout(5000));
  return leased;
}

/** `run` on a store in a fresh folder, stopped after. */
async function withStore(run: (store: Store) => Promise<void>): Promise<void> {
  using dir = tmpdir("local-ai-settle-log-");
  const store = Store.open(dir.path);
  try {
    await run(store);
  } finally {
    await store.stop();
  }
}

describe("a photo's pages' rewrite that fails", () => {
  test("setting aside a broken-off turn's photo: logged, the turn goes on", () =>
    withStore(async (store) => {
      (await firstTurn(store, SECRET, [photo])).release();
      using failing = settleFails(store);
      (await firstTurn(store, "never mind")).release();
      loggedOnce(failing.lines);
    }));

  test("a refused turn's own photo put back: logged, the refusal still goes", () =>
    withStore(async (store) => {
      const leased = await firstTurn(store, SECRET, [photo]);
      using failing = settleFails(store);
      await leased.value.putBack();
      leased.release();
      loggedOnce(failing.lines);
    }));
});
