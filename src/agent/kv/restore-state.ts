import { join } from "node:path";
import { LlmError, SlotError } from "../../llama/errors.ts";
import { noTaskLeft, restoreSlot } from "../../llama/slots.ts";
import { CoreError } from "../../protocol/errors.ts";
import { deathGraceMs, deathReason } from "../../runtime/death-reason.ts";
import type { LaunchView } from "../../runtime/launch.ts";
import { abortable } from "../../util/abortable.ts";
import { logger } from "../../util/logger.ts";
import type { DiskUse } from "./disk-use.ts";
import type { KvDisk, KvEntry } from "./kv-disk.ts";
import type { PromptRecord } from "./prompt-record.ts";
import { SLOT_FILE_TIMEOUT_MS } from "./save-slot.ts";
import type { SessionKey } from "./session-key.ts";
import { emptyBehind } from "./slot-clear.ts";

/**
 * One session's saved state restored into a slot before its turn (docs/agent.md#prompt-reuse).
 * Prompt reuse (reuse.ts) decides when; this is which saved state may be, how, and what a failure
 * leaves: it is logged and the turn processes its prompt, which is what it would have done
 * without a file.
 */

/** What a hand-over found on disk: a state to restore, none (null), or nothing looked for (undefined). */
export type Looked = KvEntry | null | undefined;

/**
 * The session's saved state if it is of this launch's shape (`fp`) and all its notes quote is
 * still stored (`quotable`, null: the store cannot tell); one that is not is dropped.
 */
export function restorableState(
  folder: DiskUse,
  key: SessionKey,
  fp: string | undefined,
  quotable: (userId: string, prompt: PromptRecord) => boolean | null,
): Looked {
  if (fp === undefined || folder.off) return undefined;
  const disk = folder.usable();
  if (!disk) return undefined;
  const entry = disk.entry(key.userId, key.sessionId);
  if (!entry) return null;
  const name = disk.nameOf(key.userId, key.sessionId);
  const fits = entry.fingerprint === fp && disk.hasState(name);
  // Its notes quote what another core erased (`quotable` dropped it), or saved for another
  // model, context, cache type or template (or its file is gone).
  const vouched = fits && quotable(key.userId, entry.prompt);
  if (vouched) return entry;
  if (vouched === null) return null; // the store cannot tell: not restored, kept for when it answers
  if (!fits) logger.info(`session ${key.sessionId}'s saved KV state does not fit this launch: dropped`);
  disk.remove(name);
  return null;
}

export interface SlotRestore {
  launch: LaunchView;
  slot: number;
  entry: KvEntry;
  disk: KvDisk;
  /** The turn's: its abort is thrown, whatever the restore made of the slot. */
  signal: AbortSignal;
  /** The restore failed: logged, and a server without a slot folder asked no more. */
  failed(err: unknown, what: string): void;
}

/** True when the slot now holds the saved state (llama-server replaced all it held with it). */
export async function restoreSlotState(r: SlotRestore): Promise<boolean> {
  const { launch, slot, entry, disk, signal } = r;
  const session = entry.session_id;
  const name = disk.nameOf(entry.user_id, session);
  const t0 = performance.now();
  // llama-server reads the file until its answer: a removal meanwhile (a save of another session
  // evicting it, an erase) is zeroed after, not under the read, which would load zeros into the
  // slot past the file's checks (drop-file.ts `Zeroes`).
  const bin = join(disk.dir, `${name}.bin`);
  disk.zeroes.begin(bin);
  // Its server's stop begun (`died`: a crash-restart, an unload) ends it too: a server stuck in the
  // kernel past its kill keeps the connection open, and the turn waited out the 60 s before it went
  // on to the restarted server. Its slot goes with the server; what it read there matters no more.
  const limit = AbortSignal.any([signal, launch.died, AbortSignal.timeout(SLOT_FILE_TIMEOUT_MS)]);
  let reading = false;
  try {
    const restored = await restoreSlot(launch, slot, `${name}.bin`, limit);
    disk.touch(entry);
    logger.debug(
      `KV state of session ${session} restored into slot ${slot}: ${restored.n_restored} tokens, ${Math.round(performance.now() - t0)} ms`,
    );
    return true;
  } catch (err) {
    // Cancelled, past its limit, or with no HTTP answer (a reset connection: its task may still be
    // queued, llama/slots.ts `noTaskLeft`), only the request stopped: llama-server reads on to the
    // end (93b). The zeroing waits for an erase queued behind the restore, which also leaves the
    // slot empty rather than holding what it read; the turn does not wait for it.
    reading = (limit.aborted || !noTaskLeft(err)) && !launch.died.aborted;
    if (reading) {
      emptyBehind(launch, slot, "a restore", () => disk.zeroes.settled(bin));
      // Still queued, it may run after that erase (a cancel keeps the file): the slot then holds it.
      launch.slots.mayHold(slot, `${entry.user_id}/${session}`);
    }
    if (signal.aborted) throw signal.reason;
    // Refused (93b), or it killed the server or did not end (93f): never asked for again. One cut
    // by a stop the core asked for (an unload, a replan: `died` with `cancelled`) is kept; a crash
    // heard before the connection's reset is the restore's doing as much as the reset would be.
    const cut = err === launch.died.reason && err instanceof CoreError && err.code === "cancelled";
    if (!cut && !(err instanceof SlotError && err.kind === "not_supported")) disk.remove(name);
    r.failed(err, `restoring session ${session}'s KV state into slot ${slot}`);
    // A server killed by the restore resets the connection a moment before its exit is heard:
    // the turn looks at `launch.died` next, to go on on a restarted server (turn.ts).
    if (err instanceof LlmError && err.kind === "connection_lost")
      await deathReason(launch.died, signal, deathGraceMs(launch));
    signal.throwIfAborted();
    // Past its limit, the turn goes on to its own request on the slot: sent before the erase
    // queued behind the restore answers, over another connection it could reach llama-server
    // first and take what the slot read as its prefix.
    if (reading) await abortable(launch.slots.workOn(slot) ?? Promise.resolve(), signal);
    return false;
  } finally {
    if (!reading) disk.zeroes.settled(bin);
  }
}
