import type { HardwareSnapshot } from "./hardware.ts";

/** How long a probe made ahead stands for the machine: free memory moves, so not long. */
export const AHEAD_MS = 5000;

/**
 * The machine probed ahead of the first plan: `initialize` starts it (server/services.ts
 * `prepareForChat`), beside the model's header, and the next probe for the same binary within
 * AHEAD_MS takes it instead of probing again. The probe runs the binary (`--list-devices`,
 * listed-devices.ts), a process start a cold chat would otherwise wait for before its spawn
 * (docs/performance.md, "A cold chat's way to the spawn"). Taken once: every later plan probes
 * afresh, as before. A plan that comes first (a chat sent as soon as `initialize` answered can
 * reach its plan before the read-ahead starts) makes the probe the read-ahead then finds under
 * way, so the two never run the binary twice at once.
 */
export class ProbeAhead {
  private last:
    | { binary: string | undefined; at: number; snapshot: Promise<HardwareSnapshot>; taken: boolean }
    | undefined;

  constructor(
    private readonly probe: (binary?: string) => Promise<HardwareSnapshot>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  start(binary: string | undefined): void {
    if (this.recent(binary)) return;
    this.last = { binary, at: this.now(), snapshot: this.probed(binary), taken: false };
  }

  /** The machine for a plan: the probe made ahead when it is for this binary and recent, else a new one. */
  take(binary?: string): Promise<HardwareSnapshot> {
    const last = this.last;
    if (last && !last.taken && this.recent(binary)) {
      last.taken = true;
      return last.snapshot.catch(() => this.probe(binary));
    }
    this.last = { binary, at: this.now(), snapshot: this.probed(binary), taken: true };
    return this.last.snapshot;
  }

  private recent(binary: string | undefined): boolean {
    return this.last !== undefined && this.last.binary === binary && this.now() - this.last.at < AHEAD_MS;
  }

  private probed(binary: string | undefined): Promise<HardwareSnapshot> {
    const snapshot = this.probe(binary);
    // A failure is the plan's to meet (it probes again, or reports it).
    snapshot.catch(() => {});
    return snapshot;
  }
}
