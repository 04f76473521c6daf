import type { HardwareSnapshot } from "./hardware.ts";

/** How long a probe made ahead stands for the machine: free memory moves, so not long. */
export const AHEAD_MS = 5000;

/**
 * The machine probed ahead of the first plan: `initialize` starts it (server/services.ts
 * `prepareForChat`), beside the model's header, and the next probe for the same binary within
 * AHEAD_MS takes it instead of probing again. The probe runs the binary (`--list-devices`,
 * listed-devices.ts), a process start a cold chat would otherwise wait for before its spawn
 * (docs/performance.md, "A cold chat's way to the spawn"). Taken once: every later plan probes
 * afresh, as before.
 */
export class ProbeAhead {
  private ahead: { binary: string | undefined; at: number; snapshot: Promise<HardwareSnapshot> } | undefined;

  constructor(
    private readonly probe: (binary?: string) => Promise<HardwareSnapshot>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  start(binary: string | undefined): void {
    const snapshot = this.probe(binary);
    // A failure is the plan's to meet: it probes again.
    snapshot.catch(() => {});
    this.ahead = { binary, at: this.now(), snapshot };
  }

  /** The machine for a plan: the probe made ahead when it is for this binary and recent, else a new one. */
  take(binary?: string): Promise<HardwareSnapshot> {
    const ahead = this.ahead;
    this.ahead = undefined;
    if (ahead && ahead.binary === binary && this.now() - ahead.at < AHEAD_MS)
      return ahead.snapshot.catch(() => this.probe(binary));
    return this.probe(binary);
  }
}
