import { join } from "node:path";
import type { LaunchPlan } from "../plan/launch.ts";
import { CoreError, cancelledError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { logger } from "../util/logger.ts";
import { childEnv, randomApiKey } from "./child-env.ts";
import type { LlamaLease, LlamaProvider, StartProgress } from "./endpoint.ts";
import { classifyStartExit } from "./exit-reason.ts";
import { LogTail, RotatingLog, readLines } from "./log-sink.ts";
import { llamaPrograms, reapLeftover, removePidRecord, writePidRecord } from "./pid-file.ts";
import { pickFreePort } from "./ports.ts";
import { workFingerprint } from "./proc-info.ts";
import { bunSpawner, type ChildProcess, type Spawner } from "./spawn.ts";

/** Timings and limits, from config.yaml's `llama` section (read at each start). */
export interface SupervisorSettings {
  startupTimeoutMs: number;
  stopGraceMs: number;
  maxRestarts: number;
  restartBackoffMs: number;
  requestTimeoutMs: number;
  logMaxBytes: number;
  logFiles: number;
}

export interface SupervisorOptions {
  /** Where llama-server is; `tried` becomes binary_missing's data. */
  findBinary: () => { path: string } | { tried: string[] };
  /** The planner's launch plan (argv without --host/--port/--api-key). */
  plan: () => Promise<LaunchPlan>;
  dataDir: () => string;
  settings: () => SupervisorSettings;
  /** Slots before any plan exists (initialize may ask before the first start). */
  fallbackSlots?: () => number;
  spawner?: Spawner;
  pickPort?: () => Promise<number>;
  /** The environment the child's is built from. */
  env?: Record<string, string | undefined>;
  healthIntervalMs?: number;
  /** Port choices before a bind failure is final. */
  maxBindAttempts?: number;
  /** Reap leftovers of dead cores before the first start (tests turn it off). */
  reap?: boolean;
}

type State = "stopped" | "starting" | "ready" | "stopping";

interface Running {
  child: ChildProcess;
  baseUrl: string;
  apiKey: string;
  port: number;
  died: AbortController;
  readyAt: number;
  /** Set once its exit is expected (stop, restart after reportFailure). */
  expectedExit: boolean;
}

/** A restart budget used up long ago should not doom a server that has since run for this long. */
const BUDGET_RESET_MS = 5 * 60_000;
const MAX_BACKOFF_MS = 30_000;
/** Even a load that keeps making progress ends after this many start-up timeouts. */
const HARD_CAP_FACTOR = 10;
const TAIL_IN_ERRORS = 20;

/**
 * Owns llama-server's life: stopped → starting → ready → stopping. Concurrent acquire()
 * callers share one start; leases map to llama-server's parallel slots and extra callers
 * wait; a crash aborts every lease's `died` signal and the next acquire restarts, within a
 * restart budget and with back-off.
 */
export class Supervisor implements LlamaProvider {
  private state: State = "stopped";
  private running: Running | undefined;
  private starting: Promise<Running> | undefined;
  private stopping: Promise<void> | undefined;
  private closed = false;
  private plan: LaunchPlan | undefined;
  private inUse = 0;
  private readonly waiters: { grant: () => void; fail: (err: unknown) => void }[] = [];
  private readonly progressListeners = new Set<(p: StartProgress) => void>();
  /** A crash (or reported failure) happened; the next start is a restart. */
  private restartPending: CoreError | undefined;
  private restarts = 0;
  private reaped: Promise<unknown> | undefined;
  private log: RotatingLog | undefined;
  readonly tail = new LogTail();
  private readonly spawner: Spawner;
  private readonly pickPort: () => Promise<number>;

  constructor(private readonly options: SupervisorOptions) {
    this.spawner = options.spawner ?? bunSpawner;
    this.pickPort = options.pickPort ?? pickFreePort;
  }

  currentState(): State {
    return this.state;
  }

  /** The running child's pid, for diagnostics and tests. */
  pid(): number | undefined {
    return this.running?.child.pid;
  }

  slots(): number {
    return this.plan?.slots ?? this.options.fallbackSlots?.() ?? 1;
  }

  async acquire(signal: AbortSignal, onProgress?: (p: StartProgress) => void): Promise<LlamaLease> {
    for (;;) {
      signal.throwIfAborted();
      if (this.closed) throw cancelledError("llama-server is stopping: the core is shutting down");
      if (onProgress) this.progressListeners.add(onProgress);
      let running: Running;
      try {
        running = await abortable(this.ensureRunning(), signal);
      } finally {
        if (onProgress) this.progressListeners.delete(onProgress);
      }
      await this.takeSlot(signal);
      // It may have died while we waited for a slot: give the slot back and start again.
      if (running.died.signal.aborted || this.running !== running) {
        this.releaseSlot();
        continue;
      }
      return this.lease(running);
    }
  }

  async stop(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0))
      w.fail(cancelledError("llama-server is stopping: the core is shutting down"));
    await this.starting?.catch(() => {});
    await this.stopRunning("stop");
    this.log?.close();
  }

  private lease(running: Running): LlamaLease {
    let released = false;
    return {
      baseUrl: running.baseUrl,
      apiKey: running.apiKey,
      died: running.died.signal,
      requestTimeoutMs: this.options.settings().requestTimeoutMs,
      release: () => {
        if (released) return;
        released = true;
        this.releaseSlot();
      },
      reportFailure: (reason: string) => this.reportFailure(running, reason),
    };
  }

  /** A lease's server failed it (wedged, protocol garbage): restart it, counted against the budget. */
  private reportFailure(running: Running, reason: string): void {
    if (this.running !== running || running.expectedExit) return;
    logger.warn(`llama-server failed a request (${reason}); restarting it`);
    const err = new CoreError(
      "internal_error",
      `llama-server stopped serving (${reason}); it will be restarted`,
      {
        log_tail: this.tail.last(TAIL_IN_ERRORS),
      },
    );
    this.restartPending = err;
    running.died.abort(err);
    void this.stopRunning("failure");
  }

  private ensureRunning(): Promise<Running> {
    if (this.state === "ready" && this.running) return Promise.resolve(this.running);
    if (!this.starting) {
      this.starting = this.startAfterStopping().finally(() => {
        this.starting = undefined;
      });
      // Every caller may have given up (aborted); the failure is still theirs, not unhandled.
      this.starting.catch(() => {});
    }
    return this.starting;
  }

  private async startAfterStopping(): Promise<Running> {
    if (this.stopping) await this.stopping;
    if (this.options.reap !== false) {
      this.reaped ??= reapLeftover(this.options.dataDir(), {
        configured: { "llama-server": llamaPrograms(this.options.findBinary()) },
      }).catch(() => {});
      await this.reaped;
    }
    if (this.closed) throw cancelledError("llama-server is stopping: the core is shutting down");
    const settings = this.options.settings();
    if (this.restartPending) {
      if (this.restarts >= settings.maxRestarts) {
        throw new CoreError(
          "internal_error",
          `llama-server failed ${this.restarts + 1} times; not restarting it again (llama.max_restarts = ${settings.maxRestarts}). Last failure: ${this.restartPending.message}`,
          { restarts: this.restarts, log_tail: this.tail.last(TAIL_IN_ERRORS) },
        );
      }
      this.restarts++;
      const backoff = Math.min(settings.restartBackoffMs * 2 ** (this.restarts - 1), MAX_BACKOFF_MS);
      logger.info(
        `restarting llama-server (restart ${this.restarts}/${settings.maxRestarts}) in ${backoff} ms`,
      );
      await Bun.sleep(backoff);
      if (this.closed) throw cancelledError("llama-server is stopping: the core is shutting down");
    }
    this.state = "starting";
    try {
      const running = await this.start(settings);
      this.restartPending = undefined;
      this.running = running;
      this.state = "ready";
      return running;
    } catch (err) {
      this.state = "stopped";
      throw err;
    }
  }

  private async start(settings: SupervisorSettings): Promise<Running> {
    const found = this.options.findBinary();
    if (!("path" in found)) {
      throw new CoreError(
        "binary_missing",
        `llama-server not found; tried: ${found.tried.join(", ") || "(nothing)"}`,
        {
          tried: found.tried,
        },
      );
    }
    const plan = await this.options.plan();
    this.plan = plan;
    const dataDir = this.options.dataDir();
    this.log ??= new RotatingLog(join(dataDir, "logs"), settings.logMaxBytes, settings.logFiles);
    const attempts = this.options.maxBindAttempts ?? 5;
    let last: CoreError | undefined;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      this.emit({ phase: "starting", attempt });
      const outcome = await this.launch(found.path, plan, settings, dataDir);
      if ("running" in outcome) return outcome.running;
      last = outcome.error;
      if (!outcome.retryPort) throw outcome.error;
      logger.warn(`${outcome.error.message}; choosing another port`);
    }
    throw last as CoreError;
  }

  /** One spawn on one port, up to ready or a classified failure. */
  private async launch(
    binary: string,
    plan: LaunchPlan,
    settings: SupervisorSettings,
    dataDir: string,
  ): Promise<{ running: Running } | { error: CoreError; retryPort: boolean }> {
    const port = await this.pickPort();
    const apiKey = randomApiKey();
    const argv = [...plan.argv, "--host", "127.0.0.1", "--port", String(port)];
    const launchTail = new LogTail(400);
    let lastProgress = Date.now();
    const t0 = lastProgress;
    let child: ChildProcess;
    try {
      child = this.spawner({ path: binary, argv, env: childEnv(this.options.env ?? process.env, apiKey) });
    } catch (err) {
      return {
        error: new CoreError(
          "binary_missing",
          `cannot run llama-server at ${binary}: ${(err as Error).message}`,
          {
            tried: [binary],
          },
        ),
        retryPort: false,
      };
    }
    this.log?.write(`--- ${new Date().toISOString()} start ${binary} ${argv.join(" ")} (pid ${child.pid})\n`);
    const onLine = (line: string) => {
      lastProgress = Date.now();
      launchTail.push(line);
      this.tail.push(line);
      this.log?.write(`${line}\n`);
    };
    void readLines(child.stdout, onLine);
    void readLines(child.stderr, onLine);
    let exit: { code: number | null; signal: string | null } | undefined;
    const exited = child.exited.then((e) => {
      exit = e;
      return e;
    });
    const writePid = () => {
      try {
        writePidRecord(dataDir, { pid: child.pid, port, binary, argv });
      } catch (err) {
        logger.warn(`could not record llama-server's pid: ${(err as Error).message}`);
      }
    };
    writePid();

    const baseUrl = `http://127.0.0.1:${port}`;
    const interval = this.options.healthIntervalMs ?? 100;
    let portAnswered = false;
    let fingerprint = workFingerprint(child.pid);
    let lastLoadingEvent = 0;
    let pollWait = 10;
    const fail = async (error: CoreError, retryPort = false) => {
      await this.stopChild(child, 0);
      removePidRecord(dataDir);
      return { error, retryPort };
    };
    for (;;) {
      if (exit) {
        await Bun.sleep(50); // let the last log lines arrive
        const why = classifyStartExit(launchTail.last(), exit.code, exit.signal);
        removePidRecord(dataDir);
        return {
          error: new CoreError(why.code, why.message, {
            exit_code: exit.code,
            signal: exit.signal,
            log_tail: launchTail.last(TAIL_IN_ERRORS),
          }),
          retryPort: why.retryPort,
        };
      }
      if (this.closed) return fail(cancelledError("llama-server is stopping: the core is shutting down"));
      const now = Date.now();
      const fp = workFingerprint(child.pid);
      if (fp !== null && fp !== fingerprint) {
        fingerprint = fp;
        lastProgress = now;
      }
      const stalled = now - lastProgress > settings.startupTimeoutMs;
      const neverOpened = !portAnswered && now - t0 > settings.startupTimeoutMs;
      const tooLong = now - t0 > settings.startupTimeoutMs * HARD_CAP_FACTOR;
      if (stalled || neverOpened || tooLong) {
        const why = neverOpened
          ? `never answered on port ${port}`
          : stalled
            ? "made no progress"
            : `kept loading past ${HARD_CAP_FACTOR}× the start-up timeout`;
        return fail(
          new CoreError(
            "internal_error",
            `llama-server did not become ready: it ${why} within ${settings.startupTimeoutMs / 1000} s (llama.startup_timeout_s)`,
            { log_tail: launchTail.last(TAIL_IN_ERRORS) },
          ),
        );
      }
      const status = await healthStatus(baseUrl, Math.max(1000, interval * 10));
      if (status !== null) portAnswered = true;
      if (status === 200) break;
      if (now - lastLoadingEvent >= 500) {
        lastLoadingEvent = now;
        this.emit({ phase: "loading", elapsed_ms: now - t0 });
      }
      // Short waits first: a small model is ready in ~0.1 s (transcript 51).
      await Promise.race([Bun.sleep(Math.min(pollWait, interval)), exited]);
      pollWait *= 2;
    }

    // /health is public, so it cannot tell our child from another program on the port: a
    // protected route must refuse no key and accept ours. This also proves the child took our
    // key (an --api-key in extra_args would lock us out of every chat).
    const probe = (headers: Record<string, string>) =>
      fetch(`${baseUrl}/v1/models`, { headers, signal: AbortSignal.timeout(5000) }).then(
        async (r) => {
          await r.arrayBuffer();
          return r.status;
        },
        () => null,
      );
    const [anonymous, keyCheck] = await Promise.all([
      probe({}),
      probe({ Authorization: `Bearer ${apiKey}` }),
    ]);
    await Bun.sleep(0);
    if (exit || (anonymous !== 401 && anonymous !== null)) {
      // Something else answers here (our child lost the bind race and exited, or is exiting).
      const taken = new CoreError(
        "internal_error",
        `another program answers on 127.0.0.1:${port} (port in use)`,
        {
          log_tail: launchTail.last(TAIL_IN_ERRORS),
        },
      );
      return fail(taken, true);
    }
    if (keyCheck === 401) {
      return fail(
        new CoreError(
          "internal_error",
          "llama-server refused this launch's API key; remove --api-key/--api-key-file from llama.extra_args",
          { log_tail: launchTail.last(TAIL_IN_ERRORS) },
        ),
      );
    }
    if (keyCheck !== 200)
      logger.warn(`llama-server answered ${keyCheck ?? "nothing"} to GET /v1/models after ready`);
    writePid(); // again: a wrapper that exec'd the real binary has a new command line by now

    const running: Running = {
      child,
      baseUrl,
      apiKey,
      port,
      died: new AbortController(),
      readyAt: Date.now(),
      expectedExit: false,
    };
    void exited.then((e) => this.onExit(running, e, dataDir));
    this.emit({ phase: "ready", elapsed_ms: Date.now() - t0 });
    logger.info(`llama-server ready on ${baseUrl} (pid ${child.pid}) after ${Date.now() - t0} ms`);
    return { running };
  }

  private onExit(
    running: Running,
    exit: { code: number | null; signal: string | null },
    dataDir: string,
  ): void {
    removePidRecord(dataDir);
    if (this.running === running) {
      this.running = undefined;
      if (this.state === "ready") this.state = "stopped";
    }
    if (running.expectedExit) return;
    const how = exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`;
    logger.error(`llama-server crashed (${how})`);
    const err = new CoreError("internal_error", `llama-server crashed (${how})`, {
      exit_code: exit.code,
      signal: exit.signal,
      log_tail: this.tail.last(TAIL_IN_ERRORS),
    });
    if (Date.now() - running.readyAt > BUDGET_RESET_MS) this.restarts = 0;
    this.restartPending = err;
    running.died.abort(err);
  }

  private stopRunning(why: string): Promise<void> {
    const running = this.running;
    if (!running) return this.stopping ?? Promise.resolve();
    this.stopping ??= (async () => {
      this.state = "stopping";
      running.expectedExit = true;
      if (!running.died.signal.aborted) {
        running.died.abort(cancelledError(`llama-server was stopped (${why})`));
      }
      await this.stopChild(running.child, this.options.settings().stopGraceMs);
      if (this.running === running) this.running = undefined;
      removePidRecord(this.options.dataDir());
      this.state = "stopped";
    })().finally(() => {
      this.stopping = undefined;
    });
    return this.stopping;
  }

  /** Polite signal, then a kill after the grace period (a streaming llama-server ignores SIGTERM for up to 30 s). */
  private async stopChild(child: ChildProcess, graceMs: number): Promise<void> {
    const gone = child.exited.then(() => true);
    if (graceMs > 0) {
      child.terminate();
      if (await Promise.race([gone, Bun.sleep(graceMs).then(() => false)])) return;
      logger.warn(`llama-server (pid ${child.pid}) ignored SIGTERM for ${graceMs} ms; killing it`);
    }
    child.kill();
    await Promise.race([gone, Bun.sleep(5000)]);
  }

  private async takeSlot(signal: AbortSignal): Promise<void> {
    if (this.inUse < this.slots() && this.waiters.length === 0) {
      this.inUse++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
        fail: (err: unknown) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private releaseSlot(): void {
    this.inUse = Math.max(0, this.inUse - 1);
    while (this.waiters.length > 0 && this.inUse < this.slots()) {
      this.inUse++;
      this.waiters.shift()?.grant();
    }
  }

  private emit(p: StartProgress): void {
    for (const l of this.progressListeners) {
      try {
        l(p);
      } catch {
        // A listener's failure is its own.
      }
    }
  }
}

/** GET /health: its status, or null when nothing answers (port not open yet). */
async function healthStatus(baseUrl: string, timeoutMs: number): Promise<number | null> {
  try {
    const res = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return null;
  }
}
