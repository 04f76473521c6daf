import type { Stats } from "node:fs";
import type { LlamaEndpoint } from "../llama/http.ts";
import { type LlamaProps, readProps } from "../llama/props.ts";
import { SpareConnection } from "../llama/spare-connection.ts";
import { abortable } from "../util/abortable.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import { type FileIdentity, fileIdentity, identityOf, sameFile } from "../util/file-identity.ts";
import { type SleepPhase, SleepWatch, type SleepWatchOptions } from "./idle-sleep.ts";
import type { ProgressListener } from "./progress-beat.ts";
import { SlotUse } from "./slot-use.ts";

/**
 * One running llama-server, made per start (docs/supervisor.md "A launch"): the facts of that
 * one process in one object, so a second model's server has its own (issue 28). Its identity
 * (`id`, and `epoch`, which also changes with each idle sleep that emptied its slots), its
 * endpoint and `died` signal, its /props once read, its idle sleep (idle-sleep.ts) and its one
 * table of slot use (slot-use.ts), which the supervisor's lease, the sleep watch and prompt reuse
 * all read. A lease exposes it as a `LaunchView`; only the supervisor counts leases on and ends it.
 */

/** The model's and projector's files as they were just before the spawn (undefined: unreadable then, or none). */
export interface LaunchFiles {
  model: FileIdentity | undefined;
  projector: FileIdentity | undefined;
  /** The LoRA adapters and control vectors extra_args load (plan/adapter-files.ts); absent: none. */
  adapters?: (FileIdentity | undefined)[];
}

/**
 * Whether the model, projector and adapters are still the files the server was started with (true when not
 * known). One replaced since (a pull updating it in place) leaves what it computes unknown: it
 * runs the old weights until it re-reads the file, as it does on waking from an idle sleep.
 */
export function filesUnchanged(files: LaunchFiles | null): boolean {
  return changedFile(files) === undefined;
}

/** Which of them is no longer the file it was, as a log names it; undefined when none is (or not known). */
export function changedFile(files: LaunchFiles | null): string | undefined {
  if (!files) return undefined;
  const same = (then: FileIdentity | undefined) =>
    then === undefined || sameFile(then, fileIdentity(then.path));
  if (!same(files.model)) return "the model file";
  if (!same(files.projector)) return "the vision projector file";
  if (!(files.adapters ?? []).every(same)) return "a LoRA adapter or control vector file";
  return undefined;
}

/**
 * `changedFile` with each file's stat asked off the loop (per save and restore, on the chat's
 * way): a model on a dead network mount held the core there, ping and cancel too. `late`: a
 * file's drive did not answer within its wait, so whether it changed is not known.
 */
export async function changedFileNow(
  files: LaunchFiles | null,
  ask: DriveAnswers = drives,
): Promise<string | undefined | "late"> {
  if (!files) return undefined;
  const named: [string, FileIdentity | undefined][] = [
    ["the model file", files.model],
    ["the vision projector file", files.projector],
    ...(files.adapters ?? []).map((a): [string, FileIdentity | undefined] => [
      "a LoRA adapter or control vector file",
      a,
    ]),
  ];
  const all = named.filter((n): n is [string, FileIdentity] => n[1] !== undefined);
  const now = await Promise.all(all.map(([, then]) => ask.statOf(then.path)));
  if (now.includes("late")) return "late";
  const changed = all.find(([, then], i) => {
    const st = now[i] as Stats | null;
    return !sameFile(then, st ? identityOf(then.path, st) : undefined);
  });
  return changed?.[0];
}

/** `changedFileNow` as a yes or no: `late` when a file's drive did not answer. */
export async function filesUnchangedNow(
  files: LaunchFiles | null,
  ask: DriveAnswers = drives,
): Promise<boolean | "late"> {
  const changed = await changedFileNow(files, ask);
  return changed === "late" ? "late" : changed === undefined;
}

/** What a lease's holder may read of its server (prompt reuse asks its slot table). */
export interface LaunchView extends LlamaEndpoint {
  /** A number per launch, in this core. */
  readonly id: number;
  /** `id#sleeps`: changes whenever the server's slots were emptied (a restart, an idle sleep). */
  readonly epoch: string;
  readonly died: AbortSignal;
  /**
   * Its process's exit, once seen: `died` is told as its stop begins, and a stopping llama-server
   * still ends the task it runs (a slot file written on). None known (a stand-in): at once.
   */
  readonly exited: Promise<void>;
  /** Times it was learned asleep: each sleep emptied its slots. */
  readonly sleeps: number;
  /** Asleep, waking or awake, as last learned. */
  readonly sleepPhase: SleepPhase;
  /** Alive and awake: it can be asked without waking it. */
  readonly awake: boolean;
  /** Whether its template thinks, as its /props said once read; undefined before. */
  readonly thinking: boolean | undefined;
  /** Its one table of slot use. */
  readonly slots: SlotUse;
  /** The vision projector it was launched with (`--mmproj`); null: none, or not planned here. */
  readonly projector: string | null;
  /** The extra_args it was launched with (`llama.extra_args`, then its models entry's); null: not planned here. */
  readonly extraArgs: readonly string[] | null;
  /** Its model files as they were at its start (agent/kv/fingerprint.ts); null: not started here. */
  readonly files: LaunchFiles | null;
  /** The RPC workers it was started with (`--rpc`), for the errors of a stall. */
  readonly rpcWorkers: readonly string[];
  /** Whether its task loop has answered a task (a completion): see `taskServed`. */
  readonly servedTask: boolean;
  /**
   * Told by whoever got an answer only llama-server's task loop gives (a completion, the
   * watched request): its loop has begun, so a polite stop is heard at once (launch-steps.ts).
   */
  taskServed(): void;
  /**
   * The check of its files begun with the last connection opened ahead, once and while fresh
   * (`connectAhead`); undefined: ask anew.
   */
  takeFilesAhead?(): Promise<string | undefined | "late"> | undefined;
  /** Its /props, read once (undefined while it cannot be read; read anew while it has no n_ctx). */
  props(signal: AbortSignal): Promise<LlamaProps | undefined>;
  /** Its context per slot (the props' n_ctx). */
  contextSize(signal: AbortSignal): Promise<number | undefined>;
}

export interface LaunchInit extends LlamaEndpoint {
  /** The plan's slots. */
  slots: number;
  /** Its idle sleep, as launched; none: it never sleeps. */
  sleep?: Omit<SleepWatchOptions, "inUse" | "onSleep">;
  /** The RPC workers passed to `--rpc`; none when absent. */
  rpcWorkers?: readonly string[];
  /** Its `died` controller when another owns it (a stand-in in a test); else its own. */
  died?: AbortController;
  /** The plan's `--mmproj` path. */
  projector?: string | null;
  /** The plan's extra_args. */
  extraArgs?: readonly string[];
  /** Its model files as read before the spawn. */
  files?: LaunchFiles;
  /** Whether its process still runs, as /proc says (proc-info.ts); none: taken as running. */
  running?: () => boolean;
  /** Its process's exit, a wrapper's llama-server's with it (spawn.ts `wholeExit`); none: taken as seen. */
  exited?: Promise<unknown>;
}

/** How long a first read of /props may take. */
const PROPS_TIMEOUT_MS = 5000;
/** A look at the process this recent, made after a spare opened, stands for the spare's own. */
const SEEN_RUNNING_MS = 5;
/**
 * A check of the files this recent stands for a chat's own: the fingerprint it guards names the
 * files the server started with, so state saved in the window is still labelled by what it holds.
 */
const FILES_AHEAD_MS = 1000;
let launchCount = 0;

export class Launch implements LaunchView {
  readonly id = ++launchCount;
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly slots: SlotUse;
  readonly projector: string | null;
  readonly extraArgs: readonly string[] | null;
  readonly files: LaunchFiles | null;
  readonly rpcWorkers: readonly string[];
  readonly exited: Promise<void>;
  private readonly sleep: SleepWatch;
  private readonly ended: AbortController;
  private known: LlamaProps | undefined;
  /** The read in flight: callers meanwhile share it. */
  private reading: Promise<LlamaProps | undefined> | undefined;
  private thinks: boolean | undefined;
  private served = false;
  /** Connections opened ahead, neither taken nor dropped yet. */
  private spares = 0;
  private readonly running: () => boolean;
  /** When the process was last seen running, just before a lease (`noteRunning`). */
  private runningSeenAt = Number.NEGATIVE_INFINITY;
  /** The check of its files begun with the last connection opened ahead (`connectAhead`). */
  private filesAhead: { at: number; changed: Promise<string | undefined | "late"> } | undefined;

  constructor(init: LaunchInit) {
    this.baseUrl = init.baseUrl;
    this.apiKey = init.apiKey;
    this.rpcWorkers = init.rpcWorkers ?? [];
    this.ended = init.died ?? new AbortController();
    this.slots = new SlotUse(init.slots);
    this.projector = init.projector ?? null;
    this.extraArgs = init.extraArgs ?? null;
    this.files = init.files ?? null;
    this.running = init.running ?? (() => true);
    this.exited = (init.exited ?? Promise.resolve()).then(
      () => {},
      () => {},
    );
    this.sleep = new SleepWatch({
      ...(init.sleep ?? { idleMs: 0, isAsleep: async () => null, rouse: async () => {} }),
      inUse: () => this.slots.leases,
      onSleep: () => this.slots.emptied(),
    });
  }

  /**
   * A connection opened now for a chat's first request (llama/spare-connection.ts), when it
   * could take a slot at once: awake, and a slot free with no one in line, the spares already
   * open counted as taken. An idle connection holds one of llama-server's HTTP threads
   * (`--threads-http`, by default the slots and four more; past them one thread each), so the spares
   * waiting never outnumber the free slots: a burst of chats opens one per free slot, not one each.
   */
  connectAhead(): SpareConnection | undefined {
    if (!this.awake || this.slots.leases + this.slots.waiting + this.spares >= this.slots.total)
      return undefined;
    this.spares++;
    const opened = performance.now();
    // The chat's first save or restore asks whether the files changed (agent/kv/fingerprint.ts):
    // asked now, the stats' round trip runs while the chat takes its session.
    if (this.files) {
      const changed = changedFileNow(this.files);
      changed.catch(() => {}); // taken by no chat: no unhandled rejection (its taker still hears it)
      this.filesAhead = { at: opened, changed };
    }
    const seen = () =>
      this.runningSeenAt >= opened && performance.now() - this.runningSeenAt < SEEN_RUNNING_MS;
    return new SpareConnection(this, { onDone: () => this.spares--, alive: () => seen() || this.running() });
  }

  takeFilesAhead(): Promise<string | undefined | "late"> | undefined {
    const ahead = this.filesAhead;
    this.filesAhead = undefined;
    return ahead && performance.now() - ahead.at < FILES_AHEAD_MS ? ahead.changed : undefined;
  }

  /**
   * Its process seen running by the look before a lease (supervisor.ts `usable`). A spare taken
   * within SEEN_RUNNING_MS after, and opened before, needs no look of its own: the two would read
   * /proc a fraction of a millisecond apart on the chat's way to its request.
   */
  noteRunning(): void {
    this.runningSeenAt = performance.now();
  }

  get servedTask(): boolean {
    return this.served;
  }

  taskServed(): void {
    this.served = true;
  }

  get died(): AbortSignal {
    return this.ended.signal;
  }

  get epoch(): string {
    return `${this.id}#${this.sleep.sleeps}`;
  }

  get sleeps(): number {
    return this.sleep.sleeps;
  }

  get sleepPhase(): SleepPhase {
    return this.sleep.state;
  }

  get awake(): boolean {
    return !this.died.aborted && this.sleep.state === "awake";
  }

  get thinking(): boolean | undefined {
    return this.thinks;
  }

  /** Whether it reads images, as its /props said once read; undefined before. */
  get vision(): boolean | undefined {
    return this.known?.modalities?.vision;
  }

  /**
   * Asked once per launch (a round trip off every later chat's time to first token): what it
   * says never changes while it runs. Not kept while it has no n_ctx (asked again next time), but
   * given all the same: its markers and modalities stand without it (turn.ts breaks the markers,
   * refuses images to a text model).
   */
  async props(signal: AbortSignal): Promise<LlamaProps | undefined> {
    if (this.known !== undefined) return this.known;
    this.reading ??= this.readProps().finally(() => {
      this.reading = undefined;
    });
    return abortable(this.reading, signal).catch(() => undefined);
  }

  /**
   * Begins the read at once, off any caller's path (the supervisor, as the launch turns ready):
   * the first chat, which needs the context size, then finds it read or in flight.
   */
  readPropsEarly(): void {
    void this.props(this.died);
  }

  /** One read, ended by the launch's end (a caller giving up stops waiting, not the read). */
  private async readProps(): Promise<LlamaProps | undefined> {
    let props: LlamaProps;
    try {
      props = await readProps(this, { signal: this.died, timeoutMs: PROPS_TIMEOUT_MS });
    } catch {
      return undefined;
    }
    if (props.thinking !== null) this.thinks = props.thinking;
    if (props.n_ctx !== null) this.known = props;
    return props;
  }

  async contextSize(signal: AbortSignal): Promise<number | undefined> {
    return (await this.props(signal))?.n_ctx ?? undefined;
  }

  /**
   * A lease lands on it, counted once in its slot table: waits in line for a free slot. False:
   * it ended first (the line ends with it; the caller starts again on the next launch); rejects
   * with `signal`'s reason. Once true, call `leave()` when the lease goes.
   */
  async admit(signal: AbortSignal): Promise<boolean> {
    try {
      await this.slots.enter(signal);
    } catch (err) {
      if (signal.aborted || !this.died.aborted) throw err;
      return false;
    }
    this.sleep.arrived();
    return true;
  }

  /** An admitted lease's server awake: woken first if it sleeps (with progress). */
  wake(signal: AbortSignal, onProgress?: ProgressListener): Promise<void> {
    return this.sleep.lease(signal, onProgress);
  }

  /** A lease left it (given back, or moved to a successor). */
  leave(): void {
    if (this.slots.leave()) this.sleep.release();
  }

  /** What the child said of itself (child mode's state lines): its sleep and wake. */
  heard(state: string): void {
    this.sleep.heard(state);
  }

  /**
   * It stops or died: leases see `died` (with `reason`, unless it already ended) and callers in
   * line for a slot hear it; no more looks at its sleep.
   */
  end(reason?: unknown): void {
    this.sleep.dispose();
    if (reason === undefined) return;
    if (!this.ended.signal.aborted) this.ended.abort(reason);
    this.slots.failWaiters(this.ended.signal.reason);
  }
}
