import { logUnexpected } from "../util/logger.ts";
import type { Timers } from "./model-runtime.ts";
import { heldBy, type ModelState } from "./model-state.ts";
import type { Room } from "./room.ts";
import type { Entry } from "./scheduler-entry.ts";

/**
 * One model's unload (scheduler.ts): loaded | loading → unloading → unloaded. A load under way
 * is aborted with `reason` and awaited; a loaded model's sessions are saved first (`save`, the
 * runtime's `beforeUnload`), then the runtime stopped; `forRoom`: unloaded once its memory is
 * given back (model-runtime.ts `stop`). Resolves at once when the state moved meanwhile.
 */
export function beginUnload(
  e: Entry,
  s: Extract<ModelState, { kind: "loaded" | "loading" }>,
  reason: Error,
  deps: { timers: Timers; room: Room; save: boolean; forRoom?: boolean },
): Promise<void> {
  deps.timers.clearTimeout(e.idleTimer);
  const done = Promise.withResolvers<void>();
  const runtime = s.kind === "loaded" ? s.live.runtime : s.job.runtime;
  const st: ModelState = { kind: "unloading", bytes: heldBy(s), runtime, done: done.promise };
  if (!e.cell.swap(s, st)) return Promise.resolve();
  const stopped = Promise.withResolvers<void>();
  void (async () => {
    if (s.kind === "loading") {
      s.job.abort.abort(reason);
      await s.job.done.catch(() => {});
    } else if (deps.save) {
      await runtime
        ?.beforeUnload(stopped.promise)
        .catch((err) => logUnexpected(`saving model ${e.name}'s sessions failed`, err));
    }
    await runtime
      ?.stop({ untilReleased: deps.forRoom === true })
      .catch((err) => logUnexpected(`stopping model ${e.name} failed`, err));
    stopped.resolve();
    e.cell.swap(st, { kind: "unloaded" });
    deps.room.notify();
    done.resolve();
  })();
  return done.promise;
}
