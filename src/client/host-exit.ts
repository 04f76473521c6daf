/**
 * The cores to kill if the host's process exits (docs/bootstrap.md "Stopping"), behind one
 * `exit` listener for every client: a listener per client made Node warn of a leak
 * (MaxListenersExceededWarning) once a host held more than ten.
 */
const kills = new Set<() => void>();

/** The one listener (exported for tests: other clients of the process may have added it already). */
export const onHostExit = (): void => {
  for (const kill of kills) {
    try {
      kill();
    } catch {
      // One core already gone must not spare the others.
    }
  }
};

/** `kill` runs if the host's process exits; again for the same function is a no-op. */
export function killOnHostExit(kill: () => void): void {
  if (kills.size === 0) process.on("exit", onHostExit);
  kills.add(kill);
}

/** No longer: its core ended. The listener goes with the last one. */
export function spareOnHostExit(kill: () => void): void {
  if (kills.delete(kill) && kills.size === 0) process.off("exit", onHostExit);
}
