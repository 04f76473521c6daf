import type { HardwareSnapshot } from "./hardware.ts";

/** How long a probe made ahead stands for the machine: free memory moves, so not long. */
export const AHEAD_MS = 5000;

interface Probed {
  binary: string | undefined;
  at: number;
  snapshot: Promise<HardwareSnapshot>;
  taken: boolean;
  running: boolean;
  /** Begun before the memory moved (`changed`): joined by no one, waited for by the next. */
  stale?: boolean;
}

/**
 * The machine probed ahead of the first plan: `initialize` starts it (server/services.ts
 * `prepareForChat`), beside the model's header, and the next probe for the same binary within
 * AHEAD_MS takes it instead of probing again. The probe runs the binary (`--list-devices`,
 * listed-devices.ts), a process start a cold chat would otherwise wait for before its spawn
 * (docs/performance.md, "A cold chat's way to the spawn"). Taken once: a later plan probes
 * afresh, as before, once that probe has ended.
 *
 * One probe at a time: on CUDA a running `--list-devices` holds a context's VRAM, so a second
 * probe beside it reads less free memory and plans smaller than the machine allows. A plan that
 * comes while a probe for its binary runs joins it, whoever started it: a plan before the
 * read-ahead, a pull whose cancelled fit check left it running, pinned models planned together.
 * One for another binary waits for it to end.
 */
export class ProbeAhead {
  private last: Probed | undefined;

  constructor(
    /** `ask`: the binary's devices asked whatever the listing memo holds (listing-memo.ts). */
    private readonly probe: (binary: string | undefined, ask: boolean) => Promise<HardwareSnapshot>,
    private readonly now: () => number = () => performance.now(),
    /** Whether the listing memo answered the snapshot's device list (listing-memo.ts). */
    private readonly remembered: (snapshot: HardwareSnapshot) => boolean = () => false,
  ) {}

  start(binary: string | undefined): void {
    // One running for another binary is waited for (`fresh`), not taken for this one's.
    if (this.recent(binary) || (this.last?.running && this.last.binary === binary)) return;
    this.fresh(binary, false);
  }

  /**
   * The binary asked its devices again, after the listing memo answered a plan (a GPU driver
   * installed since): after the probe running, and left made ahead for the next plan.
   */
  recheck(binary: string, going: () => boolean = () => true): void {
    this.fresh(binary, false, true, going);
  }

  /**
   * The memory it read has moved (a llama-server of the core's is gone: stopped, crashed, or a
   * failed start; runtime/provider.ts wires the supervisor's `onChildGone`): the probe running or
   * made ahead is no one's any more. A plan after a model unloaded joined a listing's probe that
   * began while the model still held its VRAM, and planned as if it did.
   */
  changed(): void {
    if (this.last) this.last.taken = this.last.stale = true;
  }

  /** The machine for a plan: the probe running or made ahead for this binary, else a new one. */
  take(binary?: string): Promise<HardwareSnapshot> {
    return this.use(binary, true);
  }

  /**
   * The machine for what loads nothing (`models`' fit verdicts): as `take`, but the probe made
   * ahead is left to the plan after it. A host listing the models between `initialize` and its
   * first chat took it, and that chat probed again before its spawn.
   */
  look(binary?: string, ask = false): Promise<HardwareSnapshot> {
    return this.use(binary, false, ask);
  }

  /** `ask`: `doctor` tells the binary's own answer, never the memo's. */
  private use(binary: string | undefined, taking: boolean, ask = false): Promise<HardwareSnapshot> {
    const last = this.last;
    if (
      last &&
      last.binary === binary &&
      !last.stale &&
      (last.running || (!last.taken && this.recent(binary)))
    ) {
      if (taking) last.taken = true;
      // Failed: probed again once, by the first to meet it; the others join that probe.
      const joined = last.snapshot.catch(() =>
        this.last === last ? this.fresh(binary, true, ask) : this.use(binary, taking, ask),
      );
      // One the memo answered is asked of the binary after it ends, one listing at a time.
      return ask ? joined.then((s) => (this.remembered(s) ? this.fresh(binary, true, true) : s)) : joined;
    }
    return this.fresh(binary, true, ask);
  }

  private recent(binary: string | undefined): boolean {
    return this.last !== undefined && this.last.binary === binary && this.now() - this.last.at < AHEAD_MS;
  }

  /** A new probe, after the one still running (for another binary) has ended. */
  /** `going`: checked when its turn comes; false, nothing is run (a core that began stopping). */
  private fresh(
    binary: string | undefined,
    taken: boolean,
    ask = false,
    going: () => boolean = () => true,
  ): Promise<HardwareSnapshot> {
    const before = this.last?.running ? this.last.snapshot.catch(() => undefined) : undefined;
    const run = () =>
      going() ? this.probe(binary, ask) : Promise.reject(new Error("not probed: the core is stopping"));
    const snapshot = before ? before.then(run) : run();
    const probed: Probed = { binary, at: this.now(), snapshot, taken, running: true };
    const ended = () => {
      probed.running = false;
    };
    // A failure is the plan's to meet (it probes again, or reports it).
    snapshot.then(ended, ended);
    this.last = probed;
    return snapshot;
  }
}
