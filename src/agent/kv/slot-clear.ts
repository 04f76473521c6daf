import { answeredWith, eraseSlot } from "../../llama/slots.ts";
import type { LaunchView } from "../../runtime/launch.ts";
import { logger } from "../../util/logger.ts";
import { nextTurn } from "../../util/next-turn.ts";

/** How long an erase may take: a busy slot is emptied only once its task ends. */
const ERASE_TIMEOUT_MS = 60_000;
/**
 * The longest a stopping server's exit is waited for: its stop kills it after the grace
 * (launch-steps.ts stopChild), so only a process the kill does not end (stuck in the kernel) waits it out.
 */
export const EXIT_WAIT_MS = 60_000;

/** The exits `exitSeen` waits for now, each with its wait's end (`exitWaitsEnded`). */
const exitWaits = new Set<{ exited: Promise<unknown>; end: () => void }>();

/**
 * Once a server that died (`died`, told as its stop begins) has exited, or `EXIT_WAIT_MS`, or
 * shutdown's bound (`exitWaitsEnded`), or `over` (its waiter needs it no more): until then it may
 * still end the slot task it runs, writing a file a removal would zero under it, the words it
 * wrote after kept in the blocks (docs/agent.md, "Prompt reuse").
 */
export function exitSeen(launch: LaunchView, over?: AbortSignal): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const wait = { exited: launch.exited, end: () => {} };
  const bound = new Promise<void>((resolve) => {
    wait.end = resolve;
    timer = setTimeout(resolve, EXIT_WAIT_MS);
  });
  // Its waiter done with it (a save answered meanwhile, save-slot.ts): left on, it held its timer
  // and shutdown's wait for the exits (`exitWaitsEnded`) for nothing.
  const end = () => wait.end();
  if (over?.aborted) end();
  else over?.addEventListener("abort", end, { once: true });
  exitWaits.add(wait);
  return Promise.race([launch.exited, bound]).finally(() => {
    clearTimeout(timer);
    over?.removeEventListener("abort", end);
    exitWaits.delete(wait);
  });
}

/**
 * At shutdown, after the servers' stops: the exits `exitSeen` waits for, waited for until `bound`
 * at most, then its waits end (kv-temps.ts `lateTempsAtExit`, one deadline for all). A stop that
 * returned without its exit seen SIGKILLed a server stuck in the kernel; 60 s of it held the
 * zeroings past the client's kill of the core (client/shutdown-timing.ts), the files left whole.
 */
export async function exitWaitsEnded(bound: Promise<void>): Promise<void> {
  // One begun by a promise chain a stop's `died` set going just now (`emptyBehind`) is among them.
  await nextTurn();
  await Promise.all([...exitWaits].map((w) => Promise.race([w.exited, bound]).then(w.end, w.end)));
}

/**
 * An erased session's slots emptied in llama-server too (docs/agent.md, "Prompt reuse"). Left
 * holding its prompt, a slot hands it to llama-server's RAM cache when the next session's turn
 * takes it (a prompt about to lose its slot is kept there, transcripts/94), after the erase. A
 * turn that takes one of these slots waits for its erase (`working`); a failure (the server
 * going, no slot folder: 501) is logged at debug, the slot being no one's either way.
 */
export function clearSlots(launch: LaunchView, slots: number[]): void {
  if (launch.died.aborted) return;
  for (const slot of slots) {
    const erased = eraseSlot(launch, slot, AbortSignal.timeout(ERASE_TIMEOUT_MS)).then(
      () => {},
      (err: unknown) =>
        logger.debug(`slot ${slot} was not emptied after an erase: ${(err as Error).message}`),
    );
    launch.slots.working(slot, erased);
  }
}

/**
 * A turn's own slot emptied before its next step (turn/memory.ts `dropErased`): that step no
 * longer sends a passage erased while a tool ran, and llama-server hands a slot's prompt to its
 * RAM cache when a request keeps less than half of it, the erased passage with it (94). Empty, the
 * slot hands nothing on; the step processes its prompt again. A failure (no slot folder: 501) is
 * logged at debug, as for `clearSlots`.
 */
export async function emptyTurnSlot(launch: LaunchView, slot: number, signal: AbortSignal): Promise<void> {
  if (launch.died.aborted) return;
  await eraseSlot(launch, slot, signal).catch((err: unknown) =>
    logger.debug(`slot ${slot} was not emptied after an erase: ${(err as Error).message}`),
  );
}

/** Erases asked behind a save or restore that did not answer, at most, while its server lives. */
export const ERASE_TRIES = 3;
/** The pause before the next try: an erase failing at once (a reset connection) proves nothing. Lowered in tests. */
export const ERASE_RETRY = { pauseMs: 1_000 };

/**
 * A save or restore that did not answer (cancelled, or past its limit, or no HTTP answer): llama-server
 * writes or reads the file on to the end of its task, or runs it later from its queue, so a
 * removal of the file is zeroed only after (drop-file.ts `Zeroes`), and what a restore read,
 * perhaps partly zeroed by another core's removal, must not stay in the slot for a chat sharing
 * its prefix. An erase is queued: llama-server runs its tasks in order, so it answers once that
 * task is over (93b), and leaves the slot empty, as the table now says. `settled` runs once an
 * erase is answered (an error status too), or the server has exited (`exitSeen`); an erase failing
 * otherwise (timed out, a reset connection) proves nothing, so it is asked again, `ERASE_TRIES` in
 * all, then `settled` runs unproven (docs/agent.md, The store). The next turn taking the slot
 * waits (`working`) for the first erase only, as a restore's own turn past its limit before its
 * request (restore-state.ts).
 */
export function emptyBehind(launch: LaunchView, slot: number, what: string, settled: () => void): void {
  launch.slots.cleared(slot);
  const died = launch.died;
  let heard = () => {};
  const death = new Promise<false>((resolve) => {
    heard = () => resolve(false);
    if (died.aborted) resolve(false);
    else died.addEventListener("abort", heard, { once: true });
  });
  const first = askErase(launch, slot, what);
  // The slot's next user, on a server that died, waits for none of that.
  launch.slots.working(
    slot,
    Promise.race([first, death]).then(() => {}),
  );
  void overBehind(launch, slot, what, first, death)
    .finally(() => died.removeEventListener("abort", heard))
    .finally(settled);
}

/** An erase of `slot`: true once llama-server answered it, whatever the status. */
function askErase(launch: LaunchView, slot: number, what: string): Promise<boolean> {
  return eraseSlot(launch, slot, AbortSignal.timeout(ERASE_TIMEOUT_MS)).then(
    () => true,
    (err: unknown) => {
      logger.debug(
        `slot ${slot} was not emptied after ${what} that did not answer: ${(err as Error).message}`,
      );
      return answeredWith(err);
    },
  );
}

/** Once the task before `first` is over: an erase answered, the server's exit, or the tries spent. */
async function overBehind(
  launch: LaunchView,
  slot: number,
  what: string,
  first: Promise<boolean>,
  death: Promise<false>,
): Promise<void> {
  let erase = first;
  for (let tries = 1; ; tries++) {
    if (await Promise.race([erase, death])) return;
    // A server that died may still run it until its exit.
    if (launch.died.aborted) return exitSeen(launch);
    if (tries >= ERASE_TRIES) {
      logger.warn(
        `slot ${slot}'s erase behind ${what} that did not answer failed ${tries} times: its file's removal goes on unproven`,
      );
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const pause = new Promise((r) => {
      timer = setTimeout(r, ERASE_RETRY.pauseMs);
    });
    await Promise.race([pause, death]).finally(() => clearTimeout(timer));
    if (launch.died.aborted) return exitSeen(launch);
    erase = askErase(launch, slot, what);
  }
}
