import { keepLatest } from "../../util/keep-latest.ts";
import type { ReuseDeps } from "./reuse-deps.ts";
import { keyOf } from "./session-key.ts";

/**
 * The store's erase mark as each session's last turn here ended (after its commit, under its
 * lease): its slot's state and record date from then. Another core's edit (`replace_from`,
 * `regenerate`) of the session after it erased a tail they hold, and removed only that core's
 * saved state: a save of the slot here, or its use by the session's next turn, asks the store
 * first (`stored`; docs/agent.md#prompt-reuse).
 */
export class EditMarks {
  private readonly since = new Map<string, number>();

  constructor(
    private readonly deps: Pick<ReuseDeps, "stored" | "mark">,
    private readonly kept: number,
  ) {}

  /** A turn of `holder`'s session ended here. */
  ended(holder: string): void {
    const mark = this.deps.mark?.();
    if (mark === undefined) this.since.delete(holder);
    else keepLatest(this.since, holder, mark, this.kept);
  }

  /** Whether a turn of `holder`'s session ended here, and the session was edited (or erased) since. */
  editedSince(holder: string): boolean {
    return this.since.has(holder) && !this.current(holder);
  }

  /** Whether the session is stored, no other core's, and not edited since its last turn here. */
  current(holder: string): boolean {
    const { userId, sessionId } = keyOf(holder);
    return this.deps.stored?.(userId, sessionId, this.since.get(holder)) !== false;
  }
}
