import { join } from "node:path";
import { binaryMissing } from "../config/find-binary-asked.ts";
import type { LlamaEndpoint } from "../llama/http.ts";
import { isSleeping } from "../llama/props.ts";
import { awaitModel } from "../llama/tokenize.ts";
import { adapterFiles } from "../plan/adapter-files.ts";
import { renderArgv } from "../plan/argv.ts";
import type { LaunchPlan } from "../plan/launch-plan.ts";
import { CoreError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { fileIdentity } from "../util/file-identity.ts";
import { logger } from "../util/logger.ts";
import { randomApiKey } from "./child-env.ts";
import { knownChildMode, rememberChildMode } from "./child-mode.ts";
import { Launch, type LaunchFiles } from "./launch.ts";
import {
  type LaunchFailure,
  launchOnce,
  type Spawned,
  type SpawnRequest,
  stopChild,
} from "./launch-steps.ts";
import { loadFraction } from "./load-fraction.ts";
import { dialectFor } from "./load-mode.ts";
import { earlierLogsRedacted } from "./log-scrub.ts";
import { type LogTail, llamaServerLog, llamaServerLogAhead, type RotatingLog } from "./log-sink.ts";
import { llamaPrograms, reapLeftover, recordAfterStop } from "./pid-file.ts";
import { pickFreePort } from "./ports.ts";
import { childRunning } from "./proc-info.ts";
import { memoryReleased, modelIntake } from "./proc-memory.ts";
import type { Unstamped } from "./progress-beat.ts";
import type { RpcWatch } from "./rpc-watch.ts";
import { withSlotFolder } from "./slot-folder.ts";
import { bunSpawner, wholeExit } from "./spawn.ts";
import {
  type StartFailure,
  type StartFailureSlot,
  type SupervisorOptions,
  startHeldUntil,
} from "./supervisor-options.ts";
import type { Running, StateOf } from "./supervisor-state.ts";

/** What every launch of a start shares: the spawn request but its port and key, and the plan. */
interface Prepared {
  request: Omit<SpawnRequest, "port" | "apiKey">;
  plan: LaunchPlan;
}

/** Plans again after running out of GPU memory at most this often per supervisor (decide/budgets.ts `outOfMemoryMargin` each time). */
export const MAX_OUT_OF_MEMORY = 3;

/**
 * How long a start that failed after its spawn answers the next automatic start of the same
 * plan with its error at once (docs/supervisor.md, "Start failures"), as MCP's failed starts do.
 */
export const START_FAILURE_HOLD_MS = 30_000;

/**
 * A start's work, from `starting` to a server that serves: leftovers of dead cores reaped
 * (once per process), the binary found, the plan made and rendered to argv in the flags the
 * binary takes, then launches (launch-steps.ts) until one is ready, another port only after a
 * bind failure, another plan with more of the GPU kept free only after running out of its
 * memory. The supervisor owns the state; this owns what a start leaves behind: the last plan
 * (slots and status read it) and the rotating log.
 */
export class Launcher {
  /** The plan of the last start. */
  plan: LaunchPlan | undefined;
  /**
   * Starts that ran out of memory with layers on a GPU: each plan after keeps more of it free
   * (PlanHint), for as long as this supervisor lives. At most MAX_OUT_OF_MEMORY, then the error.
   */
  private outOfMemory = 0;
  /** The last start that failed once spawned (its model's, for one of several: supervisor-options.ts). */
  private readonly failed: StartFailureSlot;
  private reaped: Promise<unknown> | undefined;
  private log: RotatingLog | undefined;
  private readonly goneSaid = new WeakSet<Spawned>();

  constructor(
    private readonly options: SupervisorOptions,
    /** The supervisor's tail, which spans launches. */
    private readonly tail: LogTail,
    private readonly rpc: RpcWatch,
  ) {
    let own: StartFailure | undefined;
    this.failed = options.startFailure ?? {
      get: () => own,
      set: (f) => {
        own = f;
      },
    };
  }

  async launch(starting: StateOf<"starting">): Promise<Running> {
    // One lookup for the reap and the plan, waited for only until a stop: on a dead drive each
    // waits out a stat's wait (config/find-binary-asked.ts), and a shutdown waited with them.
    const binary = Promise.resolve(this.options.findBinary());
    if (this.options.reap !== false) {
      this.reaped ??= binary
        .then((found) =>
          reapLeftover(this.options.dataDir(), { configured: { "llama-server": llamaPrograms(found) } }),
        )
        .catch(() => {});
      await abortable(this.reaped, starting.abort.signal);
    }
    starting.abort.signal.throwIfAborted();
    let { request, plan } = await this.prepare(starting, binary);
    let key = launchKey(request, launchFiles(plan));
    // A restart after a crash is paced by the restart budget and its back-off instead: held,
    // each would spend a restart of the budget launching nothing, and leave the model down for
    // the budget's window, not the hold's.
    this.holdBack(key, starting.explicit || starting.restartFor !== undefined);
    // The beat stamps each event with the time since this start began.
    const emit = (p: Unstamped) => starting.progress.report(p);
    const attempts = this.options.maxBindAttempts ?? 5;
    const pickPort = this.options.pickPort ?? pickFreePort;
    let binds = 0;
    for (let attempt = 1; ; attempt++) {
      // The first attempt's `starting` went out before the reap and the plan.
      if (attempt > 1) emit({ phase: "starting", attempt });
      // Read before llama-server opens them: a file replaced after is not what it loaded.
      const files = launchFiles(plan);
      // A failure is held under the launch made: one planned again after running out of GPU
      // memory is what the next start plans (PlanHint), not the plan this start began with.
      key = launchKey(request, files);
      this.rpc.spawning();
      const port = await pickPort();
      // A stop during the plan, its `--help` probe (seconds) or a replan spawns nothing.
      starting.abort.signal.throwIfAborted();
      const outcome = await launchOnce(
        { ...request, port, apiKey: randomApiKey() },
        {
          startupTimeoutMs: this.options.settings().startupTimeoutMs,
          intervalMs: this.options.healthIntervalMs ?? 100,
          signal: starting.abort.signal,
          emit,
        },
      );
      if (!("error" in outcome)) {
        // Ready: whether it printed state lines by now says whether this build speaks child mode.
        // Not waited for: the binary's drive asked again must not hold a server that is up.
        void rememberChildMode(request.binary, outcome.states.speaks);
        const skipped = this.rpc.afterReady(outcome.tail.last());
        if (skipped) {
          await stopChild(outcome.child, 0);
          recordAfterStop(request.dataDir, request.instance, outcome.child);
          throw skipped;
        }
        emit({ phase: "ready" });
        this.failed.set(undefined);
        return this.toRunning(outcome, plan, files);
      }
      const again = await this.replanned(outcome, plan, starting);
      if (again) {
        ({ request, plan } = again);
        continue;
      }
      // One that never spawned is not held: its binary made runnable, or files closed, starts at once.
      if (outcome.unspawned) throw outcome.error;
      if (!outcome.retryPort) throw this.remember(key, await this.rpc.startFailure(outcome.error), starting);
      logger.warn(`${outcome.error.message}; choosing another port`);
      if (++binds >= attempts) throw outcome.error;
    }
  }

  /**
   * After a launch that ran out of GPU memory, the plan made again with more of the GPU kept
   * free (docs/supervisor.md, "Out of GPU memory at start-up"): the estimate missed what the GPU
   * holds beyond the buffers it names. Undefined when it is not to be tried again: another
   * failure, no layers on a GPU, RPC workers (the GPU's margin is not theirs, so the plan would
   * not change), or MAX_OUT_OF_MEMORY reached. A plan that comes out the same (layers and context
   * set in the config) would only run out again: its error is thrown.
   */
  private async replanned(
    outcome: LaunchFailure,
    plan: LaunchPlan,
    starting: StateOf<"starting">,
  ): Promise<Prepared | undefined> {
    const onGpu = plan.gpu_layers > 0 && plan.rpc_workers.length === 0;
    if (!outcome.outOfMemory || !onGpu || this.outOfMemory >= MAX_OUT_OF_MEMORY) return undefined;
    this.outOfMemory++;
    logger.warn(
      `${outcome.error.message} (${plan.gpu_layers} layers on the GPU); planning again with more of the GPU kept free`,
    );
    const again = await this.prepare(starting);
    if (again.plan.gpu_layers === plan.gpu_layers && again.plan.context_per_slot === plan.context_per_slot)
      throw outcome.error;
    return again;
  }

  /**
   * A start of the same launch as one that failed once spawned within START_FAILURE_HOLD_MS (an
   * RPC worker that crashes llama-server as it loads, a model it cannot read) would pay the whole
   * load again for the same end: each chat would. Its error is the answer, at once, saying when
   * it is tried again. Another plan (a config changed, a worker lost and left out), another
   * model file, or a start the host asked for (warmup) or the restart policy paces (`exempt`)
   * launches.
   */
  private holdBack(key: string, exempt: boolean): void {
    const f = this.failed.get();
    if (exempt || f === undefined || f.key !== key) return;
    const now = (this.options.now ?? Date.now)();
    const left = f.at + START_FAILURE_HOLD_MS - now;
    if (left <= 0) return;
    const nextTryAt = new Date(f.at + START_FAILURE_HOLD_MS).toISOString();
    throw new CoreError(
      f.error.code,
      `${f.error.message} (the same start failed ${Math.round((now - f.at) / 1000)} s ago; not tried again before ${nextTryAt}; a warmup tries again at once)`,
      { ...f.error.data, next_try_at: nextTryAt, retry_in_ms: left },
    );
  }

  /**
   * A start of `plan` (the scheduler's, not yet launched) refused now by holdBack: its error,
   * thrown before the scheduler makes room for it, so no idle model is unloaded for a start that
   * launches nothing (docs/supervisor.md, "Start failures"). `exempt` as for holdBack.
   */
  async checkHold(plan: LaunchPlan, exempt: boolean): Promise<void> {
    // Past the hold nothing is refused: no key to compare (no --help asked, no folder made).
    if (exempt || this.startHeldUntil === null) return;
    const found = await this.options.findBinary();
    if (!("path" in found)) return; // the start says so
    const slotted = withSlotFolder(plan);
    const argv = await this.argvOf(found.path, slotted);
    this.holdBack(launchKey({ binary: found.path, argv }, launchFiles(slotted)), false);
  }

  /** argv in the flags this build takes (load-mode.ts). */
  private async argvOf(binary: string, plan: LaunchPlan): Promise<string[]> {
    const env = this.options.env ?? process.env;
    return renderArgv(plan, await dialectFor(binary, plan, env, this.options.loadMode));
  }

  /** A failed start's error, remembered for holdBack unless stop() ended it. */
  private remember(key: string, error: CoreError, starting: StateOf<"starting">): CoreError {
    if (!starting.abort.signal.aborted && error.code !== "cancelled")
      this.failed.set({ key, error, at: (this.options.now ?? Date.now)() });
    return error;
  }

  /** Until when a start of the launch that failed last is held (status says so); null: none is. */
  get startHeldUntil(): number | null {
    return startHeldUntil(this.failed.get(), START_FAILURE_HOLD_MS, (this.options.now ?? Date.now)());
  }

  /** Starts that ran out of GPU memory and were planned again (status says so). */
  get outOfMemoryStarts(): number {
    return this.outOfMemory;
  }

  /** Closes the log (the core is shutting down). */
  close(): void {
    this.log?.close();
  }

  /** The binary, the plan and the spawn request every launch of this start shares. */
  private async prepare(
    starting: StateOf<"starting">,
    binary = this.options.findBinary(),
  ): Promise<Prepared> {
    const settings = this.options.settings();
    const found = await abortable(Promise.resolve(binary), starting.abort.signal);
    if (!("path" in found)) throw binaryMissing(found);
    const dataDir = this.options.dataDir();
    const instance = this.options.instance;
    // The log's folder and earlier logs' pass, and the binary's stat, begun beside the plan's probe.
    this.log ??= llamaServerLogAhead(join(dataDir, "logs"), settings, instance);
    // Child mode unless this version of the binary showed it has none (child-mode.ts).
    const childMode = knownChildMode(found.path);
    // Given up at a stop (a listing, a big header on a slow disk: seconds); a slot folder every start's.
    const planned = this.options.plan({ outOfMemory: this.outOfMemory });
    const plan = withSlotFolder(await abortable(planned, starting.abort.signal));
    // One not made before the plan, tried again (its error after the plan's), but not after a stop.
    if (!starting.abort.signal.aborted)
      this.log ??= llamaServerLog(join(dataDir, "logs"), settings, instance);
    this.plan = plan;
    this.rpc.begin(plan.rpc_workers, found.path);
    // Earlier cores' logs rewritten before this start's lines (log-scrub.ts); a stop gives up the wait.
    await abortable(earlierLogsRedacted(join(dataDir, "logs")), starting.abort.signal);
    const env = this.options.env ?? process.env;
    // argv is rendered here, once, in the flags this build takes (load-mode.ts).
    const argv = await this.argvOf(found.path, plan);
    const speaksKnown = await childMode;
    const request = {
      binary: found.path,
      argv,
      env,
      spawner: this.options.spawner ?? bunSpawner,
      dataDir,
      ...(instance ? { instance } : {}),
      childMode: speaksKnown !== false,
      onLine: (line: string) => {
        this.tail.push(line);
        this.log?.write(`${line}\n`);
        this.rpc.line(line);
      },
      onSpawn: (spawned: Spawned, header: string) => {
        const { pid } = spawned.child;
        starting.pid = pid;
        starting.loadFraction = loadFraction(spawned.states, speaksKnown, pid, plan.model_bytes);
        this.log?.write(header);
        starting.spawned.resolve();
        // Before whatever waits on the exit goes on (a restart's or a replan's probe).
        void spawned.child.exited.then(() => this.gone(spawned));
      },
    };
    return { request, plan };
  }

  /**
   * A ready launch as leases see it (launch.ts), with its idle-sleep watch (idle-sleep.ts): told
   * by the state lines where the child prints them, else learned from /props.
   */
  private toRunning(spawned: Spawned, plan: LaunchPlan, files: LaunchFiles): Running {
    const endpoint = { baseUrl: spawned.baseUrl, apiKey: spawned.apiKey };
    const { states } = spawned;
    const pid = spawned.child.pid;
    const launch = new Launch({
      ...endpoint,
      slots: plan.slots,
      projector: plan.mmproj?.path ?? null,
      extraArgs: plan.extra_args,
      files,
      rpcWorkers: plan.rpc_workers,
      running: () => childRunning(pid) !== false,
      exited: wholeExit(spawned.child),
      sleep: {
        idleMs: plan.idle_sleep_s * 1000,
        pushed: states.speaks,
        isAsleep: () => isSleeping(endpoint),
        rouse: (signal) => wake(endpoint, signal, this.options.settings().startupTimeoutMs),
        // A wake re-reads the model in a process that has read before: count from here.
        wakeMeasure: () =>
          loadFraction(states, states.speaks, pid, plan.model_bytes, modelIntake(pid)?.readBytes ?? 0),
      },
    });
    states.onState = (s) => launch.heard(s.state);
    launch.readPropsEarly();
    return {
      child: spawned.child,
      launch,
      port: spawned.port,
      startedAt: spawned.t0,
      readyAt: Date.now(),
      childMode: states,
      released: () =>
        spawned.drained
          .then(() => memoryReleased(pid))
          .then((released) => {
            if (released) this.gone(spawned);
            return released;
          }),
    };
  }

  /** A child's memory is free (SupervisorOptions `onChildGone`): said once, at its exit or release. */
  private gone(spawned: Spawned): void {
    if (this.goneSaid.has(spawned)) return;
    this.goneSaid.add(spawned);
    this.options.onChildGone?.();
  }
}

/**
 * Wakes a sleeping server (llama/tokenize.ts `awaitModel`), within `timeoutMs`
 * (llama.startup_timeout_s: a reload is the same load as a start). Rejects when `signal` aborts
 * (the server is gone) or the time is up.
 */
async function wake(endpoint: LlamaEndpoint, signal: AbortSignal, timeoutMs: number): Promise<void> {
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    await awaitModel(endpoint, AbortSignal.any([signal, timeout]));
  } catch (err) {
    if (timeout.aborted && !signal.aborted)
      throw new Error(`it did not reload its model within ${timeoutMs / 1000} s (llama.startup_timeout_s)`);
    throw err;
  }
}

/** The model's, projector's and adapters' files as they are now. */
function launchFiles(plan: LaunchPlan): LaunchFiles {
  const adapters = adapterFiles(plan.extra_args).map((path) => fileIdentity(path));
  return {
    model: fileIdentity(plan.model_path),
    projector: plan.mmproj ? fileIdentity(plan.mmproj.path) : undefined,
    ...(adapters.length > 0 ? { adapters } : {}),
  };
}

/**
 * What a start launches: the binary, its arguments, and its files as they were then (a projector
 * pulled again, at the same path, is another launch, as a model file is, and so is a llama-server
 * upgraded in place to read a model it could not, or an adapter its trainer finished writing).
 */
function launchKey(request: Pick<Prepared["request"], "binary" | "argv">, files: LaunchFiles): string {
  const binary = fileIdentity(request.binary) ?? request.binary;
  const adapters = (files.adapters ?? []).map((a) => a ?? null);
  return JSON.stringify([binary, request.argv, files.model, files.projector ?? null, adapters]);
}
