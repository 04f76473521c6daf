import { describe, expect, test } from "bun:test";
import { type QuietSave, QuietTimer } from "../../../src/agent/kv/quiet-timer.ts";

// The quiet save's timer (docs/agent.md#prompt-reuse) and the view tests await it through
// (reuse-deps.ts `quietSeen`): `ran` must settle only once the save it fired has ended, or the
// tests that prove a quiet save keeps nothing would look before it wrote.

/** A timer whose idle wait never ends in a test: each quiet save is fired with `now()`. */
function timer() {
  const seen: QuietSave[] = [];
  return { quiet: new QuietTimer(600_000, (q) => seen.push(q)), seen };
}

const settled = async (p: Promise<void>) => {
  let done = false;
  void p.then(() => {
    done = true;
  });
  // Two turns of the microtask queue: a settled promise's reaction has run by then.
  await Promise.resolve();
  await Promise.resolve();
  return done;
};

describe("the quiet save's timer", () => {
  test("fired now: the save runs, and `ran` settles only once it has ended", async () => {
    const { quiet, seen } = timer();
    const save = Promise.withResolvers<void>();
    let runs = 0;
    quiet.set(() => {
      runs++;
      return save.promise;
    });
    expect(seen).toHaveLength(1);
    expect(await settled(seen[0]!.ran)).toBe(false);
    seen[0]?.now();
    seen[0]?.now(); // fired already: not run again
    expect(runs).toBe(1);
    expect(await settled(seen[0]!.ran)).toBe(false);
    save.resolve();
    expect(await settled(seen[0]!.ran)).toBe(true);
  });

  test("a save that fails, or finds nothing to do, settles `ran` too", async () => {
    const { quiet, seen } = timer();
    quiet.set(() => Promise.reject(new Error("disk full")));
    seen[0]?.now();
    expect(await settled(seen[0]!.ran)).toBe(true);
    quiet.set(() => undefined);
    seen[1]?.now();
    expect(await settled(seen[1]!.ran)).toBe(true);
  });

  test("set again, or cleared: the earlier save never runs, its `ran` settles", async () => {
    const { quiet, seen } = timer();
    const runs: string[] = [];
    quiet.set(() => {
      runs.push("first");
      return undefined;
    });
    quiet.set(() => {
      runs.push("second");
      return undefined;
    });
    expect(await settled(seen[0]!.ran)).toBe(true);
    seen[0]?.now();
    quiet.clear();
    expect(await settled(seen[1]!.ran)).toBe(true);
    seen[1]?.now();
    expect(runs).toEqual([]);
  });

  test("a server found busy: the save is set again, and runs when the next wait ends", async () => {
    const { quiet, seen } = timer();
    const answers: ("busy" | undefined)[] = ["busy", undefined];
    let runs = 0;
    quiet.set(() => {
      runs++;
      return answers.shift();
    });
    seen[0]?.now();
    expect(await settled(seen[0]!.ran)).toBe(true);
    expect(seen).toHaveLength(2);
    seen[1]?.now();
    expect(runs).toBe(2);
    expect(await settled(seen[1]!.ran)).toBe(true);
    quiet.clear(); // none set a third time
    expect(seen).toHaveLength(2);
  });

  test("the idle wait ends by itself: the save runs", async () => {
    const seen: QuietSave[] = [];
    const quiet = new QuietTimer(0, (q) => seen.push(q));
    let runs = 0;
    quiet.set(() => {
      runs++;
      return undefined;
    });
    await seen[0]?.ran;
    expect(runs).toBe(1);
  });
});
