import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { dropFile, Zeroes } from "../../../src/agent/kv/drop-file.ts";
import { KvDisk, type KvEntry } from "../../../src/agent/kv/kv-disk.ts";
import { entryOf } from "../../../src/agent/kv/kv-entry.ts";
import { emptyRecord } from "../../../src/agent/kv/prompt-record.ts";
import { restoreSlotState } from "../../../src/agent/kv/restore-state.ts";
import { SLOT_FILE_TIMEOUT_MS, saveSlotState } from "../../../src/agent/kv/save-slot.ts";
import { UnderWay } from "../../../src/agent/kv/under-way.ts";
import { kvErased } from "../../../src/methods/kv-erased.ts";
import { Launch } from "../../../src/runtime/launch.ts";
import { type HeldFile, holdOpen } from "../../fixtures/held-file.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A saved KV state is the conversation's tokens: a file an erase only unlinks keeps them in the
// disk's blocks (docs/agent.md, The store). A descriptor the test holds (fixtures/held-file.ts)
// still reads the file's blocks after the core's name is gone, so it shows what the disk kept.
const FP = "f".repeat(32);
const TOKENS = "tokens of my secret diagnosis\n".repeat(4_000);
const bytes = Buffer.byteLength(TOKENS);

async function saved(disk: KvDisk, user: string, session: string): Promise<string> {
  const name = disk.nameOf(user, session);
  const temp = disk.tempName(name);
  fs.writeFileSync(join(disk.dir, temp), TOKENS);
  const entry = entryOf(
    { userId: user, sessionId: session },
    FP,
    { n_saved: 10, n_written: bytes },
    emptyRecord(),
    [],
    1,
  );
  expect(await disk.commit(temp, entry)).toBe(true);
  return join(disk.dir, `${name}.bin`);
}

/** A save's temporary file of u/s, still being written (parked), removed by its session's erase. */
function erasedWhileSaved(dir: string) {
  const disk = new KvDisk(dir, 10_000_000);
  const temp = join(dir, disk.tempName(disk.nameOf("u", "s")));
  disk.zeroes.begin(temp);
  fs.writeFileSync(temp, TOKENS);
  const kept = holdOpen(temp);
  disk.removeSession("u", "s");
  return { disk, temp, kept };
}

describe("an erase's KV state files are zeroed on the disk", () => {
  test("sessions.delete: the session's state file", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const kept = holdOpen(await saved(disk, "u", "s"));
    const other = holdOpen(await saved(disk, "u", "t"));
    expect(disk.unremovedBy(() => disk.removeSession("u", "s"))).toEqual([]);
    await disk.zeroes.done();
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
    expect(other.read().toString()).toBe(TOKENS);
  });

  test("users.delete: every state file of the user", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const kept = [holdOpen(await saved(disk, "u", "s")), holdOpen(await saved(disk, "u", "t"))];
    disk.removeUser("u");
    await disk.zeroes.done();
    expect(kept.map((k) => k.zeroed())).toEqual([
      { size: bytes, allZero: true },
      { size: bytes, allZero: true },
    ]);
  });

  // llama-server writes a save's temporary file until it answers (save-slot.ts): zeroed at the
  // erase, what it wrote after would stay in the blocks; it is zeroed once the save is over.
  test("a save's temporary file still being written is zeroed once the save is over", async () => {
    using dir = tmpdir();
    const { disk, temp, kept } = erasedWhileSaved(dir.path);
    expect(fs.existsSync(temp)).toBe(false);
    kept.append(TOKENS); // the server writing on into the file it holds open
    disk.zeroes.settled(temp);
    await disk.zeroes.done();
    expect(kept.zeroed()).toEqual({ size: 2 * bytes, allZero: true });
  });

  // A delete answers once its files are zeroed (docs/agent.md, The store): a removal parked under a
  // save (or a restore) counted for nothing in `done`, so the delete answered `deleted: true` with
  // the tokens still in the blocks, and a core quit then left them there for good.
  test("done waits for a removal parked under a save until the save is over and it is zeroed", async () => {
    using dir = tmpdir();
    const { disk, temp, kept } = erasedWhileSaved(dir.path);
    let over = false;
    const done = disk.zeroes.done().then(() => {
      over = true;
    });
    await Promise.resolve();
    expect(over).toBe(false);
    disk.zeroes.settled(temp);
    await done;
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
  });

  // A save asked just before the erase (its task queued behind another slot's prefill in
  // llama-server) had no file yet for the erase to find: nothing was parked, the delete answered at
  // once, and the file llama-server then wrote (the erased tokens) stayed until the save ended, or,
  // a save before an unload, until the server stopped.
  test("a save's temporary file not yet made at the erase goes, zeroed, before the answer", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const temp = join(dir.path, disk.tempName(disk.nameOf("u", "s")));
    disk.zeroes.begin(temp); // the save asked (save-slot.ts), its task not yet run
    disk.removeSession("u", "s");
    let over = false;
    const done = disk.zeroes.done().then(() => {
      over = true;
    });
    fs.writeFileSync(temp, TOKENS); // the task runs: the file made after the erase looked
    const kept = holdOpen(temp);
    await new Promise((resolve) => setImmediate(resolve));
    expect(over).toBe(false);
    disk.zeroes.settled(temp);
    await done;
    expect(fs.existsSync(temp)).toBe(false);
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
  });

  test("the delete answers only once the zeroing is done", async () => {
    let finish = () => {};
    const zeroing = new Promise<void>((resolve) => {
      finish = resolve;
    });
    let answered = false;
    const answer = kvErased([], {
      kvZeroed: () => zeroing,
      config: () => ({ app: { data_dir: "/nowhere" } }) as never,
    }).then(() => {
      answered = true;
    });
    await Promise.resolve();
    expect(answered).toBe(false);
    finish();
    await answer;
    expect(answered).toBe(true);
  });
});

// llama-server reads a state file until it answers its restore: another session's save evicting
// it (or an erase) meanwhile zeroed it under the read, and the slot could take zeros past the
// file's checks, its tokens intact: another chat sharing their prefix reused them. The removal
// is zeroed once the restore is over (restore-state.ts).
/**
 * A stand-in llama-server whose save or restore never answers (`first` runs as it is asked), and
 * whose erase answers only once `over`: tasks run in order (93b), so not before that one ended.
 */
function stalling(first: (req: Request) => Promise<void> | void = () => {}) {
  const asked: string[] = [];
  const stalled = Promise.withResolvers<void>();
  const erase = Promise.withResolvers<void>();
  const over = Promise.withResolvers<void>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const action = new URL(req.url).searchParams.get("action") ?? "";
      asked.push(action);
      if (action !== "erase") {
        await first(req);
        stalled.resolve();
        return new Promise<Response>(() => {});
      }
      erase.resolve();
      await over.promise;
      return Response.json({ id_slot: 0, n_erased: 10 });
    },
  });
  return { server, asked, stalled: stalled.promise, eraseAsked: erase.promise, over: over.resolve };
}

describe("a state file a restore is reading", () => {
  test("is zeroed only once llama-server has answered the restore", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const kept = holdOpen(await saved(disk, "u", "s"));
    let answer = () => {};
    let asked = () => {};
    const restoreAsked = new Promise<void>((resolve) => {
      asked = resolve;
    });
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () =>
        new Promise<Response>((resolve) => {
          asked();
          answer = () =>
            resolve(
              Response.json({
                id_slot: 0,
                filename: "x.bin",
                n_restored: 10,
                n_read: bytes,
                timings: { restore_ms: 1 },
              }),
            );
        }),
    });
    try {
      const launch = new Launch({ baseUrl: `http://127.0.0.1:${server.port}`, apiKey: "k", slots: 1 });
      const entry = disk.entry("u", "s");
      const restoring = restoreSlotState({
        launch,
        slot: 0,
        entry: entry as KvEntry,
        disk,
        signal: new AbortController().signal,
        failed: () => {},
      });
      await restoreAsked;
      disk.removeSession("u", "s");
      // `done` counts the parked removal too (a delete answers once it is zeroed): it is over only
      // after the answer. Unparked, a file this small is zeroed within a few turns of the loop
      // (a bound only on when a regression shows, never a reason for this test to fail).
      let over = false;
      const done = disk.zeroes.done().then(() => {
        over = true;
      });
      for (let turn = 0; turn < 200 && !over; turn++) await new Promise((r) => setImmediate(r));
      expect(over).toBe(false);
      expect(kept.read().toString()).toBe(TOKENS);
      answer();
      expect(await restoring).toBe(true);
      await done;
      expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
    } finally {
      server.stop(true);
    }
  });

  // Cancelled (or past its 60 s), only the request stopped: llama-server read on to the end of
  // its task (a slot action runs to its end on the task loop, 93b) while `finally` zeroed the file
  // under the read, and the failed path left the slot holding what it read. Now an erase is queued
  // behind the restore (tasks run in order, 93b: its answer comes once the restore is over), the
  // zeroing waits for its answer, and the slot counts as empty.
  describe("that did not answer", () => {
    async function cancelledWhileRead(dir: string, died: AbortController) {
      const disk = new KvDisk(dir, 10_000_000);
      const kept = holdOpen(await saved(disk, "u", "s"));
      const fake = stalling();
      const launch = new Launch({
        baseUrl: `http://127.0.0.1:${fake.server.port}`,
        apiKey: "k",
        slots: 1,
        died,
      });
      // Slot 0 held u/t's prompt; u/s's turn takes it and restores its state there.
      launch.slots.release(0, "u/t", true, 1);
      launch.slots.take("u/s", 2);
      launch.slots.handTo(0, "u/s");
      const cancel = new AbortController();
      const restoring = restoreSlotState({
        launch,
        slot: 0,
        entry: disk.entry("u", "s") as KvEntry,
        disk,
        signal: cancel.signal,
        failed: () => {},
      });
      await fake.stalled;
      disk.removeSession("u", "s");
      let over = false;
      const done = disk.zeroes.done().then(() => {
        over = true;
      });
      cancel.abort(new Error("cancelled"));
      // The cancel answers at once, the erase still unanswered.
      await expect(restoring).rejects.toThrow("cancelled");
      return { disk, kept, fake, launch, done, over: () => over };
    }

    test("its file is zeroed once an erase queued behind it has answered, the slot empty", async () => {
      using dir = tmpdir();
      const { kept, fake, launch, done, over } = await cancelledWhileRead(dir.path, new AbortController());
      try {
        // As above, a bound only on when a regression shows.
        for (let turn = 0; turn < 200 && !over(); turn++) await new Promise((r) => setImmediate(r));
        expect(over()).toBe(false);
        expect(kept.read().toString()).toBe(TOKENS);
        await fake.eraseAsked;
        expect(fake.asked).toEqual(["restore", "erase"]);
        // Held by no one, yet maybe the session's: the erase can run before a queued restore (restore-late.test.ts).
        expect(launch.slots.sessionsIn(0)).toEqual(["u/s"]);
        // The next turn taking the slot waits for the erase (reuse.ts `begin`).
        let emptied = false;
        const next = launch.slots.workOn(0)?.then(() => {
          emptied = true;
        });
        expect(next).toBeDefined();
        await Promise.resolve();
        expect(emptied).toBe(false);
        fake.over();
        await done;
        expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
        await next;
        expect(emptied).toBe(true);
      } finally {
        kept[Symbol.dispose]();
        fake.server.stop(true);
      }
    });

    test("a server that dies before the erase answers settles it", async () => {
      using dir = tmpdir();
      const died = new AbortController();
      const { kept, fake, done } = await cancelledWhileRead(dir.path, died);
      try {
        died.abort(new Error("llama-server exited"));
        await done;
        expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
      } finally {
        kept[Symbol.dispose]();
        fake.server.stop(true);
      }
    });
  });

  // Two reads of one file overlap: a restore that did not answer reads on until its erase answers
  // (above), and the session's next turn, on another slot, restores the same file meanwhile. The
  // first to end settled the path for both, so a removal during the other's read was zeroed under it.
  test("read by two restores is zeroed only once both are over", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "u-s.bin");
    fs.writeFileSync(path, TOKENS);
    using kept = holdOpen(path);
    const zeroes = new Zeroes();
    zeroes.begin(path);
    zeroes.begin(path);
    zeroes.settled(path);
    expect(dropFile(path, zeroes)).toBe(true);
    let over = false;
    const done = zeroes.done().then(() => {
      over = true;
    });
    // As above, a bound only on when a regression shows.
    for (let turn = 0; turn < 200 && !over; turn++) await new Promise((r) => setImmediate(r));
    expect(over).toBe(false);
    expect(kept.read().toString()).toBe(TOKENS);
    zeroes.settled(path);
    await done;
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
  });
});

/**
 * The save's or restore's limit (the first of 60 s), passed when `limit` aborts; every other limit
 * as it is. The erase's is 60 s too: given the first one's, already passed, it gave up at once and
 * the file was zeroed with no answer waited for, a test passing only as its append came first.
 */
function firstFileLimit(limit: AbortController) {
  const timeout = AbortSignal.timeout.bind(AbortSignal);
  let first = true;
  return spyOn(AbortSignal, "timeout").mockImplementation((ms: number) => {
    if (ms !== SLOT_FILE_TIMEOUT_MS || !first) return timeout(ms);
    first = false;
    return limit.signal;
  });
}

// A save past its 60 s limit stops only the request: llama-server writes the temporary file on
// to the end of its task (93b). The file was zeroed as the request failed and what the server
// wrote after stayed in its blocks. Now the zeroing waits for an erase queued behind the save.
test("a save's temporary file written on past its limit is zeroed once an erase behind it answers", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const limit = new AbortController();
  const spy = firstFileLimit(limit);
  let kept: HeldFile | undefined;
  const { server, stalled, over, eraseAsked } = stalling(async (req) => {
    const { filename } = (await req.json()) as { filename: string };
    fs.writeFileSync(join(dir.path, filename), TOKENS);
    kept = holdOpen(join(dir.path, filename));
  });
  try {
    const launch = new Launch({ baseUrl: `http://127.0.0.1:${server.port}`, apiKey: "k", slots: 1 });
    const saving = saveSlotState({
      launch,
      slot: 0,
      holder: "u/s",
      fingerprint: FP,
      disk,
      underWay: new UnderWay(),
      wanted: () => true,
      record: emptyRecord,
      failed: () => {},
    });
    await stalled;
    limit.abort(new Error("timed out"));
    await saving;
    kept?.append(TOKENS); // the server writing on into the file it holds open
    await eraseAsked;
    // As above, a bound only on when a regression shows.
    for (let turn = 0; turn < 200; turn++) await new Promise((r) => setImmediate(r));
    expect(kept?.zeroed()).toEqual({ size: 2 * bytes, allZero: false });
    over();
    await launch.slots.workOn(0);
    await disk.zeroes.done();
    expect(kept?.zeroed()).toEqual({ size: 2 * bytes, allZero: true });
  } finally {
    kept?.[Symbol.dispose]();
    spy.mockRestore();
    server.stop(true);
  }
});

/** A restore left past its limit, the erase queued behind it asked and unanswered until `over`. */
async function restorePastLimit(dir: string, turn: AbortSignal) {
  const disk = new KvDisk(dir, 10_000_000);
  await saved(disk, "u", "s");
  const limit = new AbortController();
  const spy = firstFileLimit(limit);
  const fake = stalling();
  const launch = new Launch({ baseUrl: `http://127.0.0.1:${fake.server.port}`, apiKey: "k", slots: 1 });
  const state = { settled: false };
  const restoring = restoreSlotState({
    launch,
    slot: 0,
    entry: disk.entry("u", "s") as KvEntry,
    disk,
    signal: turn,
    failed: () => {},
  }).finally(() => {
    state.settled = true;
  });
  restoring.catch(() => {});
  await fake.stalled;
  limit.abort(new Error("timed out"));
  await fake.eraseAsked;
  // As above, a bound only on when a regression shows.
  for (let t = 0; t < 200 && !state.settled; t++) await new Promise((r) => setImmediate(r));
  return {
    restoring,
    state,
    over: fake.over,
    [Symbol.dispose]() {
      spy.mockRestore();
      fake.server.stop(true);
    },
  };
}

// A restore past its 60 s limit (not cancelled): the turn goes on to its own request on the slot.
// It did not wait for the erase queued behind the restore, so over another connection its request
// could reach llama-server first and reuse as its prefix what the slot read (partly zeroed by
// another core's removal, the case the erase is for). It now sends nothing before the erase answers.
test("a restore past its limit returns only once the erase queued behind it has answered", async () => {
  using dir = tmpdir();
  using past = await restorePastLimit(dir.path, new AbortController().signal);
  expect(past.state.settled).toBe(false);
  past.over();
  expect(await past.restoring).toBe(false);
});

// That wait (up to the erase's own 60 s) is the turn's: a cancel must end it at once, as any.
test("a cancel ends a restore's wait for the erase behind it at once", async () => {
  using dir = tmpdir();
  const turn = new AbortController();
  using past = await restorePastLimit(dir.path, turn.signal);
  turn.abort(new Error("cancelled"));
  // No answer from the erase is given: a wait that ignored the cancel stays unsettled here.
  for (let t = 0; t < 200 && !past.state.settled; t++) await new Promise((r) => setImmediate(r));
  expect(past.state.settled).toBe(true);
  await expect(past.restoring).rejects.toThrow("cancelled");
  past.over();
});
