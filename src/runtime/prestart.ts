import type { StartTicket } from "./endpoint.ts";
import type { StateOf, SupervisorState } from "./supervisor-state.ts";

/** What prestart() hands out: the start it began, to recognise that start's failure later. */
export class Prestart implements StartTicket {
  private told = false;

  constructor(private readonly start: StateOf<"starting">) {}

  get spawned(): Promise<void> {
    return this.start.spawned.promise;
  }

  /** The state is the one this start's failure left, and its error has not been given out yet. */
  failedInto(s: SupervisorState): boolean {
    return !this.told && this.start.failure?.into === s;
  }

  take(): unknown {
    this.told = true;
    return this.start.failure?.error;
  }
}
