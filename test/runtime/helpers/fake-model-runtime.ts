import type { SpareConnection } from "../../../src/llama/spare-connection.ts";
import { cancelledError } from "../../../src/protocol/errors.ts";
import type { AcquireOptions, LlamaLease } from "../../../src/runtime/endpoint.ts";
import { Launch, type LaunchFiles } from "../../../src/runtime/launch.ts";
import type { DeviceBytes } from "../../../src/runtime/memory-fit.ts";
import type { ModelFootprint, ModelRuntime, StopOptions } from "../../../src/runtime/model-runtime.ts";
import type { SupervisorSnapshot } from "../../../src/runtime/snapshot.ts";
import type { StartProgress } from "../../../src/runtime/start-progress.ts";
import { abortable } from "../../../src/util/abortable.ts";

const GIB = 1024 ** 3;

export interface FakeSpec {
  /** Planned GiB on gpu0 (or bytes per device). */
  gib?: number;
  bytes?: DeviceBytes;
  /** Its start waits until `open()`. */
  gated?: boolean;
  /** Its start fails with this. */
  fail?: Error;
  /** Its plan fails with this. */
  planFails?: Error;
  /** A restart after `crash()` fails with this (a spent restart budget), unless the host asked (explicit). */
  restartFails?: Error;
  /** Called as its sessions are saved before an unload (what the save can see then). */
  onSave?: () => void;
  /** Its save before an unload ends only once this settles (a slow disk). */
  saveGate?: Promise<void>;
  /** Its start is held (launcher.ts checkHold): a start nobody asked for is refused with this. */
  held?: Error;
  /** Its hold check decides only once this settles (as the real one, on whether asked as it began). */
  holdGate?: Promise<void>;
  /** Its server's model files, read as the runtime is made (a load after an unload reads them again). */
  files?: () => LaunchFiles;
}

/** One model's stand-in runtime: a start (gated or failing on request), leases, a save and a stop, logged. */
export class FakeRuntime implements ModelRuntime {
  up = false;
  stopped = false;
  /** Its server died behind the scheduler's back (`crash()`): stopped, not closed; a start restarts it. */
  dead = false;
  /** The current server's end, as `ready` hands it out. */
  private died = new AbortController();
  leases = 0;
  /** Whether the save's own part came once the stop had been asked (beforeUnload's `stopped`). */
  keptAfterStop: boolean | undefined;
  /** Every lease ever handed out. */
  taken = 0;
  /** What its leases reported (reportFailure: a wedge, a lost connection). */
  readonly failures: string[] = [];
  /** Its plans made (`plannedBytes`). */
  plans = 0;
  private readonly gate = Promise.withResolvers<void>();
  private readonly down = new AbortController();
  /** Its one server, for the leases to expose (its `died` is `down`). */
  private readonly launch: Launch;

  constructor(
    readonly name: string,
    private readonly log: string[],
    private readonly spec: FakeSpec,
    private readonly budget: DeviceBytes,
    readonly pid: number,
  ) {
    const files = spec.files?.();
    this.launch = new Launch({
      baseUrl: `http://${name}`,
      apiKey: "key",
      slots: 2,
      died: this.down,
      ...(files ? { files } : {}),
    });
  }

  open(): void {
    this.gate.resolve();
  }

  async plannedBytes(): Promise<ModelFootprint> {
    this.plans++;
    if (this.spec.planFails) throw this.spec.planFails;
    return { bytes: this.spec.bytes ?? { gpu0: (this.spec.gib ?? 1) * GIB }, budget: this.budget };
  }

  async checkHold(explicit: boolean): Promise<void> {
    await this.spec.holdGate;
    if (this.spec.held && !explicit) throw this.spec.held;
  }

  async ready(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<AbortSignal> {
    if (this.stopped) throw cancelledError(`${this.name} stopped`);
    if (this.up) return this.died.signal;
    this.log.push(this.dead ? `${this.name}.restart` : `${this.name}.start`);
    // As the real restart policy: a start the host asked for (warmup, models.load) is not counted.
    if (this.dead && this.spec.restartFails && options?.explicit !== true) throw this.spec.restartFails;
    this.dead = false;
    this.died = new AbortController();
    onProgress?.({ phase: "loading", elapsed_ms: 0 });
    if (this.spec.gated) await abortable(abortable(this.gate.promise, this.down.signal), signal);
    if (this.spec.fail) throw this.spec.fail;
    this.up = true;
    return this.died.signal;
  }

  /** A failure reported (a wedge): its end signalled at once, its server still stopping until `halted()`. */
  halting = false;

  failReported(): void {
    this.up = false;
    this.halting = true;
    this.died.abort(new Error(`${this.name} failed`));
  }

  /** The stop a reported failure began has ended: stopped, as after a crash. */
  halted(): void {
    this.halting = false;
    this.dead = true;
  }

  /** Its server dies, as a SIGKILL behind the core's back: stopped, and its end signalled. */
  crash(): void {
    this.up = false;
    this.dead = true;
    this.died.abort(new Error(`${this.name} crashed`));
  }

  async acquire(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<LlamaLease> {
    await this.ready(signal, onProgress, options);
    this.leases += 1;
    this.taken += 1;
    let released = false;
    return {
      baseUrl: `http://${this.name}`,
      apiKey: "key",
      died: this.down.signal,
      launch: this.launch,
      requestTimeoutMs: 1000,
      release: () => {
        if (released) return;
        released = true;
        this.leases -= 1;
      },
      reportFailure: (reason) => void this.failures.push(reason),
    };
  }

  prestart(): undefined {
    return undefined;
  }

  /** A token in place of a connection (its host name does not resolve): which runtime was asked, and when. */
  connectAhead(): SpareConnection | undefined {
    return this.up ? (`spare of ${this.name}` as unknown as SpareConnection) : undefined;
  }

  slots(): number {
    return 2;
  }

  snapshot(): SupervisorSnapshot {
    const state = this.halting
      ? "stopping"
      : this.stopped || this.dead
        ? "stopped"
        : this.up
          ? "ready"
          : "starting";
    return {
      state,
      pid: this.pid,
      slots: { busy: this.leases, waiting: 0, total: 2 },
    } as unknown as SupervisorSnapshot;
  }

  async beforeUnload(stopped?: Promise<void>): Promise<void> {
    this.log.push(`${this.name}.save`);
    this.spec.onSave?.();
    await this.spec.saveGate;
    // What the real one keeps on disk once the server has stopped (reuse.ts saveBeforeUnload).
    void stopped?.then(() => {
      this.keptAfterStop = this.stopped;
    });
  }

  /** Each stop's `untilReleased`, in order. */
  readonly stops: boolean[] = [];

  async stop(options: StopOptions = {}): Promise<void> {
    this.stops.push(options.untilReleased === true);
    this.log.push(`${this.name}.stop`);
    this.stopped = true;
    this.down.abort(cancelledError(`${this.name} stopped`));
  }
}

/** The factory the scheduler is handed: one fresh runtime per load, each kept for the test to look at. */
export class FakeFleet {
  readonly log: string[] = [];
  readonly made = new Map<string, FakeRuntime[]>();
  private pid = 100;

  constructor(
    private readonly specs: Record<string, FakeSpec>,
    private readonly budget: DeviceBytes = { gpu0: 10 * GIB },
  ) {}

  spec(name: string): FakeSpec {
    const s = this.specs[name];
    if (!s) throw new Error(`no fake model ${name}`);
    return s;
  }

  readonly runtime = (name: string): FakeRuntime => {
    const r = new FakeRuntime(name, this.log, this.spec(name), this.budget, this.pid++);
    this.made.set(name, [...(this.made.get(name) ?? []), r]);
    return r;
  };

  last(name: string): FakeRuntime {
    const all = this.made.get(name) ?? [];
    const r = all[all.length - 1];
    if (!r) throw new Error(`${name} was never made`);
    return r;
  }
}

/** A signal nothing aborts. */
export const signal = () => new AbortController().signal;
