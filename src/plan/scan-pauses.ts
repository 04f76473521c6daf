/**
 * Work between a scan's pauses (`gguf-scan.ts`), in strings stepped over: the 16 Mi entries a
 * header may hold took ~1.8 s in one stretch, `ping` and `cancel` waiting (docs/plan.md). A key,
 * a tensor or an entry of an array of arrays counts ENTRY_STEPS. One count for the whole header:
 * 1,024 arrays of 1,024 strings each, none long by itself, held the loop as one long array did.
 */
const STEPS_PER_TURN = 1 << 16;
export const ENTRY_STEPS = 64;

/** The work done since the last pause: `spend` says when one is due, and counts again from 0. */
export class Pauses {
  private work = 0;
  /** Steps left before the next pause is due. */
  room(): number {
    return STEPS_PER_TURN - this.work;
  }
  spend(steps: number): boolean {
    this.work += steps;
    if (this.work < STEPS_PER_TURN) return false;
    this.work = 0;
    return true;
  }
}
