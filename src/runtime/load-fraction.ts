import type { StateLines } from "./child-state.ts";
import { intakeFraction, modelIntake } from "./proc-memory.ts";

/**
 * Where the `fraction` of loading (and of waking) comes from: the state lines of a child that
 * prints them (child mode, on every OS: child-state.ts); only where they are absent, how much of
 * the model /proc shows the process has read (Linux: proc-memory.ts). A binary known to speak
 * child mode waits for its first line instead of reading /proc meanwhile: the two measure
 * different things (a memory-mapped model reads as whole at once), so mixing them would jump.
 */
export function loadFraction(
  states: StateLines,
  speaksKnown: boolean | undefined,
  pid: number,
  modelBytes: number | undefined,
  /** `rchar` when the wait began: a wake re-reads the model in a process that has read before. */
  baselineReadBytes = 0,
): () => number | undefined {
  return () => {
    if (states.speaks) return states.load.value;
    if (speaksKnown === true) return undefined;
    return intakeFraction(modelIntake(pid), modelBytes, baselineReadBytes);
  };
}
