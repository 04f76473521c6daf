// The quiet save's timer (docs/agent.md#prompt-reuse): set again as each turn ends, cleared by a
// stop or an unload, which save themselves (reuse.ts).

/** A quiet save as its timer is set: `ran` once it fired and its save ended (or it was cleared). */
export interface QuietSave {
  ran: Promise<void>;
  /** Fires it now rather than at the end of the idle wait (tests: after what they arranged). */
  now(): void;
}

export class QuietTimer {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private cleared: (() => void) | undefined;

  /** `seen`: a test's view of each quiet save (reuse-deps.ts `quietSeen`); none in the core. */
  constructor(
    private readonly ms: number,
    private readonly seen?: (quiet: QuietSave) => void,
  ) {}

  /**
   * `save` once idle for `ms`, this timer's earlier one cleared. `save` answers "busy" when the
   * server was not idle: set again, not dropped. The lease keeping it busy may end with no turn's
   * end to set it (a turn cancelled before it took a slot, a warmup), and the change stayed unsaved.
   */
  set(save: () => Promise<void> | "busy" | undefined): void {
    this.clear();
    const ran = Promise.withResolvers<void>();
    const fire = () => {
      if (this.timer !== timer) return; // cleared, or fired already
      clearTimeout(timer);
      this.timer = undefined;
      this.cleared = undefined;
      const saving = save();
      if (saving === "busy") this.set(save);
      void Promise.resolve(saving === "busy" ? undefined : saving).then(ran.resolve, ran.resolve);
    };
    const timer = setTimeout(fire, this.ms);
    timer.unref?.();
    this.timer = timer;
    this.cleared = ran.resolve;
    this.seen?.({ ran: ran.promise, now: fire });
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.cleared?.();
    this.cleared = undefined;
  }
}
