import { join } from "node:path";
import { noTaskLeft, type SlotSaved, saveSlot, slotsAnswered } from "../../llama/slots.ts";
import type { LaunchView } from "../../runtime/launch.ts";
import { logger } from "../../util/logger.ts";
import type { KvDisk } from "./kv-disk.ts";
import { entryOf } from "./kv-entry.ts";
import { watchLateTemp } from "./kv-temps.ts";
import type { Later } from "./later.ts";
import { noteSources, type PromptRecord } from "./prompt-record.ts";
import { keyOf } from "./session-key.ts";
import { emptyBehind, exitSeen } from "./slot-clear.ts";
import type { UnderWay } from "./under-way.ts";

/**
 * One slot's state saved to disk for its session (docs/agent.md#prompt-reuse): llama-server
 * writes it under a temporary name, the core describes it (the session's prompt record and the
 * sources its notes quote) and renames both into place, unless the session was erased meanwhile,
 * here or by another core. Prompt reuse (reuse.ts) decides when; this is how.
 */

/** A save or a restore that takes longer is given up (the file stays as it was). */
export const SLOT_FILE_TIMEOUT_MS = 60_000;

export interface SlotSave {
  launch: LaunchView;
  slot: number;
  /** The session whose state the slot holds (its key text). */
  holder: string;
  fingerprint: string;
  disk: KvDisk;
  underWay: UnderWay;
  /**
   * Whether the holder's state is still to be kept (asked before the sidecar is written and again
   * right before the renames): its session not erased, by this core or another.
   */
  wanted(): boolean;
  /** The holder's prompt record, as the sidecar will describe it. */
  record(): PromptRecord;
  /** The save failed: logged, and a server without a slot folder asked no more. */
  failed(err: unknown, what: string): void;
  /** Before an unload: the core's part is kept once the server has stopped (reuse.ts `saveBeforeUnload`). */
  later?: Later;
}

export async function saveSlotState(s: SlotSave): Promise<void> {
  const { launch, slot, holder, disk } = s;
  const key = keyOf(holder);
  const temp = disk.tempName(disk.nameOf(key.userId, key.sessionId));
  // llama-server writes it until its answer: a removal meanwhile is zeroed only after (drop-file.ts).
  const path = join(disk.dir, temp);
  disk.zeroes.begin(path);
  const t0 = performance.now();
  const job = s.underWay.begin(holder);
  // Its server's stop begun (`died`), the request ends with the wait for its exit, which
  // shutdown's one bound ends too (slot-clear.ts `exitWaitsEnded`): a server stuck in the kernel
  // past its SIGKILL keeps the connection open, and 60 s of it held an erased session's removal,
  // parked behind this save, past the client's kill of the core, the file left whole.
  const exitOver = new AbortController();
  // Answered, the save has no use for that wait (only a failure's removal waits on the exit):
  // ended, not left holding a 60 s timer and shutdown's wait for the exits (slot-clear.ts).
  const waitDone = new AbortController();
  let exitWait: Promise<void> | undefined;
  const onDied = () => {
    exitWait = exitSeen(launch, waitDone.signal);
    void exitWait.then(() => exitOver.abort(launch.died.reason));
  };
  if (launch.died.aborted) onDied();
  else launch.died.addEventListener("abort", onDied, { once: true });
  const limit = AbortSignal.any([AbortSignal.timeout(SLOT_FILE_TIMEOUT_MS), exitOver.signal]);
  let writing = false;
  let stopping = false;
  let saved: SlotSaved;
  try {
    saved = await saveSlot(launch, slot, temp, limit);
  } catch (err) {
    s.underWay.end(job);
    disk.discard(temp);
    launch.slots.saveFailed(slot, holder);
    // With no HTTP answer (past its limit, a reset or cut connection), llama-server may write on,
    // or run the queued save later (into the file just removed, or a new one it has yet to open):
    // zeroed once an erase queued behind it answers, a file made since removed then. Its server
    // stopping (`died` is told as the stop begins), it may end the save before its exit: zeroed
    // once that is seen.
    stopping = launch.died.aborted;
    writing = stopping || !noTaskLeft(err);
    if (writing) removeOnceOver(s, temp, stopping ? (exitWait ?? exitSeen(launch)) : undefined);
    return s.failed(err, `saving session ${key.sessionId}'s KV state from slot ${slot}`);
  } finally {
    launch.died.removeEventListener("abort", onDied);
    if (!stopping) waitDone.abort();
    if (!writing) disk.zeroes.settled(path);
  }
  // Erased while it was being saved (sessions.delete, here or by another core): nothing of it stays.
  const wanted = () => !job.erased && s.wanted();
  const keep = async () => {
    try {
      if (!wanted()) return disk.discard(temp);
      const record = s.record();
      const entry = entryOf(key, s.fingerprint, saved, record, noteSources(record), Date.now());
      if (saved.n_saved === 0 || !(await disk.commit(temp, entry, wanted))) return disk.discard(temp);
    } finally {
      s.underWay.end(job);
    }
    logger.debug(
      `KV state of session ${key.sessionId} saved from slot ${slot}: ${saved.n_saved} tokens, ${saved.n_written} bytes, ${Math.round(performance.now() - t0)} ms`,
    );
  };
  if (s.later && !s.later.closed) s.later.keeps.push(keep);
  else return keep();
}

/**
 * A failed save's temporary file removed once llama-server can write it no more: after its
 * server's exit (`exited`, its stop begun), else once an erase queued behind the save answers.
 */
function removeOnceOver(s: SlotSave, temp: string, exited: Promise<void> | undefined): void {
  const { launch, slot, disk } = s;
  const path = join(disk.dir, temp);
  const over = () => {
    disk.discard(temp);
    disk.zeroes.settled(path);
    // An erase behind it can answer before its deferred task runs: looked for again (kv-temps.ts).
    watchLateTemp(
      path,
      launch.exited,
      () => disk.discard(temp),
      () => loopPastSave(launch),
      disk.zeroes,
    );
  };
  if (exited) void exited.then(over);
  else emptyBehind(launch, slot, "a save", over);
}

/**
 * Whether llama-server's loop is past a save that made a late file (kv-temps.ts `watchLateTemp`).
 * Known asleep, it is: its loop sleeps only with no task queued (b10587 server-queue.cpp
 * `start_loop`), and GET /slots would wake it, the model read again, for each file
 * (server-context.cpp `create_response`; docs/agent.md, "The store").
 */
function loopPastSave(launch: LaunchView): Promise<boolean> {
  if (!launch.died.aborted && launch.sleepPhase === "asleep") return Promise.resolve(true);
  return slotsAnswered(launch, launch.died);
}
