import { expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { dropFile, Zeroes } from "../../../src/agent/kv/drop-file.ts";
import { KvDisk, type KvEntry } from "../../../src/agent/kv/kv-disk.ts";
import { LATE_LOOK } from "../../../src/agent/kv/kv-temps.ts";
import { restoreSlotState } from "../../../src/agent/kv/restore-state.ts";
import { emptyBehind } from "../../../src/agent/kv/slot-clear.ts";
import { CoreError, cancelledError } from "../../../src/protocol/errors.ts";
import { Launch } from "../../../src/runtime/launch.ts";
import { type HeldFile, holdOpen } from "../../fixtures/held-file.ts";
import { kvEraseOf, saveUs } from "../../fixtures/slot-save.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A server's `died` is told as its stop BEGINS (supervisor.ts halt), not at its exit: a stopping
// llama-server ends the slot task it runs first (tasks run to their end, 93b), so a removal zeroed
// at `died` was zeroed while the server still wrote the file, and what it wrote after stayed in the
// blocks. It is zeroed once the process's exit is seen (launch.ts `exited`). A descriptor the test
// holds (fixtures/held-file.ts) still reads the blocks after the core's name is gone.
const TOKENS = "tokens of my secret diagnosis\n".repeat(4_000);
const bytes = Buffer.byteLength(TOKENS);

/** A stand-in llama-server whose save or restore never answers, nor its erase: it is stopping. */
function stalling(first: (req: Request) => Promise<void> | void = () => {}) {
  const stalled = Promise.withResolvers<void>();
  const erase = Promise.withResolvers<void>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      if (new URL(req.url).searchParams.get("action") === "erase") erase.resolve();
      else {
        await first(req);
        stalled.resolve();
      }
      return new Promise<Response>(() => {});
    },
  });
  return { server, stalled: stalled.promise, eraseAsked: erase.promise };
}

/** A launch whose `died` and process exit the test tells. */
function stopping(port: number) {
  const died = new AbortController();
  const exit = Promise.withResolvers<void>();
  const launch = new Launch({
    baseUrl: `http://127.0.0.1:${port}`,
    apiKey: "k",
    slots: 1,
    died,
    exited: exit.promise,
  });
  return { launch, died, exit };
}

/** A bound only on when a regression shows: the zeroing would have run within these turns. */
async function turns(): Promise<void> {
  for (let t = 0; t < 200; t++) await new Promise((r) => setImmediate(r));
}

/**
 * A save into `dir`'s folder whose server writes the file (held open: `kept`) and then is
 * stopped, still writing: `died` first, then its connections close (SIGTERM).
 */
async function saveCutByStop(dir: string) {
  const disk = new KvDisk(dir, 10_000_000);
  const held: { kept?: HeldFile } = {};
  const fake = stalling(async (req) => {
    const { filename } = (await req.json()) as { filename: string };
    fs.writeFileSync(join(dir, filename), TOKENS);
    held.kept = holdOpen(join(dir, filename));
  });
  const { launch, died, exit } = stopping(fake.server.port as number);
  const saving = saveUs(disk, launch);
  await fake.stalled;
  died.abort(new Error("llama-server was stopped"));
  fake.server.stop(true);
  await saving;
  return { disk, held, exit, [Symbol.dispose]: () => held.kept?.[Symbol.dispose]() };
}

test("a save cut off by its server's stop is zeroed only once the server's exit is seen", async () => {
  using dir = tmpdir();
  using cut = await saveCutByStop(dir.path);
  const { disk, exit } = cut;
  const kept = cut.held.kept;
  await turns();
  expect(kept?.read().toString()).toBe(TOKENS);
  kept?.append(TOKENS); // the save's end, written before the exit
  exit.resolve();
  await disk.zeroes.done();
  expect(kept?.zeroed()).toEqual({ size: 2 * bytes, allZero: true });
});

// A restore that did not answer: the zeroing of its file waits for an erase queued behind it, or
// for its server's death (slot-clear.ts `emptyBehind`), which a stop tells as it begins.
test("a removal parked behind a slot's erase, its server then stopped, is zeroed once the exit is seen", async () => {
  using dir = tmpdir();
  // A state file read by a restore of this core, removed meanwhile: its zeroing parked.
  const zeroes = new Zeroes();
  const read = join(dir.path, "u-s.bin");
  fs.writeFileSync(read, TOKENS);
  using kept = holdOpen(read);
  zeroes.begin(read);
  expect(dropFile(read, zeroes)).toBe(true);
  const fake = stalling();
  const { launch, died, exit } = stopping(fake.server.port as number);
  try {
    emptyBehind(launch, 0, "a restore", () => zeroes.settled(read));
    await fake.eraseAsked;
    died.abort(new Error("llama-server was stopped (unload)"));
    const state = { zeroed: false, slotFree: false };
    const done = zeroes.done().finally(() => Object.assign(state, { zeroed: true }));
    // The slot's next user does not wait for the exit: a turn moves on to a restarted server.
    void launch.slots.workOn(0)?.then(() => Object.assign(state, { slotFree: true }));
    await turns();
    expect({ ...state, read: kept.read().toString() }).toEqual({
      zeroed: false,
      slotFree: true,
      read: TOKENS,
    });
    exit.resolve();
    await done;
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
  } finally {
    fake.server.stop(true);
  }
});

// A save cut off by its server's stop waited up to 60 s (slot-clear.ts EXIT_WAIT_MS) for an exit
// a server stuck in the kernel past its SIGKILL never makes, and shutdown's zeroing waited with
// it: the client killed the core first (client/shutdown-timing.ts), the file left whole. At
// shutdown it is waited for under the late temps' one bound (kv-temps.ts `lateTempsAtExit`).
test("at shutdown, a save's zeroing behind a server whose exit is never seen waits the one bound, not 60 s", async () => {
  using dir = tmpdir();
  const bound = LATE_LOOK.atShutdownMs;
  LATE_LOOK.atShutdownMs = 20;
  try {
    // Its exit is never seen: a server stuck in the kernel past its SIGKILL.
    using cut = await saveCutByStop(dir.path);
    await kvEraseOf(dir.path, cut.disk).atShutdown();
    expect(cut.held.kept?.zeroed()).toEqual({ size: bytes, allZero: true });
  } finally {
    LATE_LOOK.atShutdownMs = bound;
  }
}, 3000);

// The same wait behind a restore's erase (slot-clear.ts `emptyBehind`), its server stopped
// under it: shutdown's one bound ends it too.
test("at shutdown, a removal parked behind a slot's erase, its server's exit never seen, is zeroed within the bound", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const read = join(dir.path, "u-s.bin");
  fs.writeFileSync(read, TOKENS);
  using kept = holdOpen(read);
  disk.zeroes.begin(read);
  expect(dropFile(read, disk.zeroes)).toBe(true);
  const fake = stalling();
  const { launch, died } = stopping(fake.server.port as number);
  const bound = LATE_LOOK.atShutdownMs;
  LATE_LOOK.atShutdownMs = 20;
  try {
    emptyBehind(launch, 0, "a restore", () => disk.zeroes.settled(read));
    await fake.eraseAsked;
    died.abort(new Error("llama-server was stopped (shutdown)"));
    await kvEraseOf(dir.path, disk).atShutdown();
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
  } finally {
    LATE_LOOK.atShutdownMs = bound;
    fake.server.stop(true);
  }
}, 3000);

// A save whose server was stopped while it wrote, the server stuck in the kernel past its SIGKILL:
// its connection stays open, so the save's request (save-slot.ts) ran on to its 60 s limit, and
// the erased session's removal parked behind it held shutdown's zeroing that long: the client
// killed the core first, the user's tokens left whole. Shutdown's one bound now ends it too.
test("at shutdown, an erased session's save still asked of a server stuck past its stop is zeroed within the bound", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const held: { kept?: HeldFile } = {};
  const fake = stalling(async (req) => {
    const { filename } = (await req.json()) as { filename: string };
    fs.writeFileSync(join(dir.path, filename), TOKENS);
    held.kept = holdOpen(join(dir.path, filename));
  });
  const { launch, died } = stopping(fake.server.port as number);
  const bound = LATE_LOOK.atShutdownMs;
  LATE_LOOK.atShutdownMs = 20;
  try {
    const saving = saveUs(disk, launch);
    await fake.stalled;
    disk.removeSession("u", "s"); // the user deleted the session meanwhile
    died.abort(new Error("llama-server was stopped (shutdown)"));
    await turns();
    await kvEraseOf(dir.path, disk).atShutdown();
    expect(held.kept?.zeroed()).toEqual({ size: bytes, allZero: true });
    await saving;
  } finally {
    LATE_LOOK.atShutdownMs = bound;
    held.kept?.[Symbol.dispose]();
    fake.server.stop(true);
  }
}, 3000);

// The review asked whether a restore, bounded only by its turn's signal and 60 s, holds a removal
// parked behind it past shutdown's bound on a server stuck past its stop, as a save did (396f4807).
// It does not: the stop cancels every chat (dispatcher.ts `stopAll`) before the services' stop,
// so the restore's request ends then and the removal waits only for the exit, which the bound ends.
test("at shutdown, an erased session's restore on a server stuck past its stop is zeroed within the bound", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const bin = join(dir.path, `${disk.nameOf("u", "s")}.bin`);
  fs.writeFileSync(bin, TOKENS);
  const kept = holdOpen(bin);
  const fake = stalling();
  const { launch, died } = stopping(fake.server.port as number);
  const bound = LATE_LOOK.atShutdownMs;
  LATE_LOOK.atShutdownMs = 20;
  try {
    const turn = new AbortController();
    const entry = { user_id: "u", session_id: "s" } as KvEntry;
    const restoring = restoreSlotState({
      launch,
      slot: 0,
      entry,
      disk,
      signal: turn.signal,
      failed: () => {},
    });
    await fake.stalled;
    disk.removeSession("u", "s"); // the user deleted the session meanwhile: parked behind the read
    turn.abort(new Error("the core is shutting down")); // the stop cancels the chat first
    died.abort(new Error("llama-server was stopped (shutdown)"));
    await restoring.catch(() => {});
    await turns();
    await kvEraseOf(dir.path, disk).atShutdown();
    expect(kept.zeroed()).toEqual({ size: bytes, allZero: true });
  } finally {
    LATE_LOOK.atShutdownMs = bound;
    kept[Symbol.dispose]();
    fake.server.stop(true);
  }
}, 3000);

// Outside shutdown no one cancels the turn: a server that crashed and is stuck in the kernel past
// its kill (or one unloaded, replanned) keeps the restore's connection open, and the turn waited
// out the request's 60 s before it went on to the restarted server. The restore now ends with its
// server's `died`: a stop the core asked for keeps the state; a crash drops it, as the reset
// would have (93f: a restore that kills its server is never asked for again).
for (const [why, reason, kept] of [
  ["a stop the core asked for", cancelledError("llama-server was stopped (unload)"), true],
  ["a crash", new CoreError("internal_error", "llama-server crashed (killed by SIGABRT)"), false],
] as const)
  test(`a restore whose server's stop begins ends then, the turn going on; after ${why} its state ${kept ? "kept" : "dropped"}`, async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const name = disk.nameOf("u", "s");
    fs.writeFileSync(join(dir.path, `${name}.bin`), TOKENS);
    const fake = stalling();
    const { launch, died } = stopping(fake.server.port as number);
    const failures: string[] = [];
    try {
      const restoring = restoreSlotState({
        launch,
        slot: 0,
        entry: { user_id: "u", session_id: "s" } as KvEntry,
        disk,
        signal: new AbortController().signal,
        failed: (_err, what) => void failures.push(what),
      });
      await fake.stalled;
      died.abort(reason);
      expect(await restoring).toBe(false);
      expect(failures).toHaveLength(1);
      expect(fs.existsSync(join(dir.path, `${name}.bin`))).toBe(kept);
    } finally {
      fake.server.stop(true);
    }
  }, 3000);
