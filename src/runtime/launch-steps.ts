import { healthStatus, modelsStatus } from "../llama/health.ts";
import { secretsByEnv, shownArgs } from "../plan/secret-args.ts";
import { CoreError, cancelledError, openFilesUsedUp } from "../protocol/errors.ts";
import { logger } from "../util/logger.ts";
import { childEnv } from "./child-env.ts";
import { CHILD_MODE_ENV, EXIT_LINE } from "./child-mode.ts";
import { StateLines } from "./child-state.ts";
import { classifyStartExit, modelGone } from "./exit-reason.ts";
import { llamaLogLine, startLineText } from "./llama-log-text.ts";
import { LogRedactor, secretHider, spawnClocks } from "./log-redact.ts";
import { LogTail, readLines } from "./log-sink.ts";
import { recordAfterStop, writePidRecord } from "./pid-file.ts";
import { workFingerprint } from "./proc-info.ts";
import { type ChildProcess, groupEnds, type Spawner } from "./spawn.ts";
import type { StartProgress } from "./start-progress.ts";

// One launch of llama-server on one port, in three steps a test can drive one at a time:
// spawn → wait until healthy → verify it is ours (our key). `launchOnce` chains them and
// cleans up after a failed step. The supervisor decides what a launch means (ready, restart).

/** Even a load that keeps making progress ends after this many start-up timeouts. */
export const HARD_CAP_FACTOR = 10;
/** Log lines carried in a CoreError's data. */
export const TAIL_IN_ERRORS = 20;

export type Exit = { code: number | null; signal: string | null };

/**
 * A launch step's failure; `retryPort` when another port may succeed (bind race, port taken),
 * `outOfMemory` when it ran out of memory loading (the launcher may plan again with less on the GPU).
 */
export interface LaunchFailure {
  error: CoreError;
  retryPort: boolean;
  outOfMemory?: boolean;
  /** Nothing was spawned (the binary not runnable, open files used up): nothing loaded to hold. */
  unspawned?: boolean;
}

/** A spawned child, from spawn until it is ready or given up. */
export interface Spawned {
  child: ChildProcess;
  /** What was spawned, for the pid record (the reaper checks a leftover against it). */
  binary: string;
  argv: string[];
  port: number;
  apiKey: string;
  baseUrl: string;
  /** Date.now() at spawn; start-up bounds count from here. */
  t0: number;
  /** This launch's own output (the supervisor's tail spans launches). */
  tail: LogTail;
  /** Date.now() of the last log line: load progress. */
  lastLine: number;
  /** Set while the health wait sleeps: output may mean it is ready, so poll now. */
  nudge?: () => void;
  /** A line came since the health wait's last poll began (one while a poll was in flight counts). */
  spoke?: boolean;
  /** Set once the child has exited. */
  exit: Exit | undefined;
  exited: Promise<Exit>;
  /** Settles once both output pipes are read to their end (the child and whatever inherited them closed them). */
  drained: Promise<void>;
  /** Its state lines (child mode, child-state.ts): whether it speaks it, the load's progress. */
  states: StateLines;
}

export interface SpawnRequest {
  binary: string;
  /** The planned argv, without --host/--port. */
  argv: string[];
  port: number;
  apiKey: string;
  /** The environment the child's is built from. */
  env: Record<string, string | undefined>;
  spawner: Spawner;
  dataDir: string;
  /** Which model's llama-server, in its pid record's name (pid-file.ts); absent: the model section's. */
  instance?: string;
  /**
   * Start it as a router's child (child-mode.ts): LLAMA_SERVER_ROUTER_PORT set and stdin a pipe
   * we hold. Harmless to a build without it, which ignores both.
   */
  childMode?: boolean;
  /** Every output line but the state lines, for the supervisor's tail and the rotating log. */
  onLine: (line: string) => void;
  /** Right after spawn: the child and the log file's header line for this start. */
  onSpawn?: (spawned: Spawned, header: string) => void;
}

/**
 * Step 1: spawn on 127.0.0.1:port with the key, and any secret of extra_args llama-server reads
 * from there, in the child's environment (plan/secret-args.ts); record its pid.
 */
export function spawnServer(req: SpawnRequest): Spawned | LaunchFailure {
  const given = [...req.argv, "--host", "127.0.0.1", "--port", String(req.port)];
  const { argv, env: secrets } = secretsByEnv(given);
  // Before the spawn: should it throw, no child is left running unrecorded.
  const hide = secretHider(given, req.apiKey);
  // A key of extra_args' own is accepted beside ours (transcripts/76b).
  const apiKey = secrets.LLAMA_API_KEY === undefined ? req.apiKey : `${req.apiKey},${secrets.LLAMA_API_KEY}`;
  const env = {
    ...childEnv(req.env, apiKey),
    ...secrets,
    LLAMA_API_KEY: apiKey,
    ...(req.childMode ? CHILD_MODE_ENV : {}),
  };
  let child: ChildProcess;
  // Before the spawn: no message of llama-server's names a time since its start past this.
  const clocks = spawnClocks();
  try {
    child = req.spawner({ path: req.binary, argv, env, stdinPipe: req.childMode === true });
  } catch (err) {
    return {
      // Out of open files (the pipes' socketpair) the binary is fine: not for a host to reinstall.
      error:
        openFilesUsedUp(err, `cannot start llama-server at ${req.binary} now`) ??
        new CoreError(
          "binary_missing",
          `cannot run llama-server at ${req.binary}: ${(err as Error).message}`,
          {
            tried: [req.binary],
          },
        ),
      retryPort: false,
      unspawned: true,
    };
  }
  const spawned: Spawned = {
    child,
    binary: req.binary,
    argv,
    port: req.port,
    apiKey: req.apiKey,
    baseUrl: `http://127.0.0.1:${req.port}`,
    t0: Date.now(),
    tail: new LogTail(400),
    lastLine: Date.now(),
    exit: undefined,
    exited: child.exited.then((e) => {
      spawned.exit = e;
      return e;
    }),
    states: new StateLines(),
    drained: Promise.resolve(),
  };
  req.onSpawn?.(
    spawned,
    `--- ${new Date().toISOString()} start ${startLineText(`${req.binary} ${shownArgs(given).join(" ")}`)} (pid ${child.pid})\n`,
  );
  // One redactor a stream: a quoted text's lines follow its message on the stream it came on.
  // State lines only on stdout (90): stderr's log quotes the model's text, newlines and all.
  const lineReader = (redactor: LogRedactor, states?: StateLines) => (raw: string, cut: boolean) => {
    spawned.lastLine = Date.now();
    spawned.spoke = true;
    spawned.nudge?.();
    if (states?.take(raw)) return; // progress, not log: the router, too, keeps them out of its log
    const quoted = redactor.line(raw, cut);
    if (quoted === null) return;
    // Its controls escaped after the secrets are hidden: each is matched as llama-server quotes it.
    const line = llamaLogLine(hide(quoted));
    spawned.tail.push(line);
    req.onLine(line);
  };
  spawned.drained = Promise.all([
    readLines(child.stdout, lineReader(new LogRedactor(clocks), spawned.states), undefined, hide),
    readLines(child.stderr, lineReader(new LogRedactor(clocks)), undefined, hide),
  ]).then(() => {});
  recordChild(req.dataDir, spawned, req.instance);
  return spawned;
}

/**
 * The pid record for the reaper (pid-file.ts). Written right after spawn and again once ready
 * (a wrapper that exec'd the real binary has a new command line by then).
 */
export function recordChild(dataDir: string, spawned: Spawned, instance?: string): void {
  try {
    const { child, port, binary, argv } = spawned;
    writePidRecord(dataDir, { pid: child.pid, port, binary, argv, group: child.group }, instance);
  } catch (err) {
    logger.warn(`could not record llama-server's pid: ${(err as Error).message}`);
  }
}

export interface HealthWait {
  startupTimeoutMs: number;
  /** The longest pause between /health polls. */
  intervalMs: number;
  /** stop(): give up, the caller kills the child. */
  signal: AbortSignal;
  emit: (p: StartProgress) => void;
}

/**
 * Step 2: poll GET /health until 200. The start-up timeout counts from the last sign of
 * progress (a log line, or a change in the child's CPU/IO counters), so a slow disk does not
 * fail a good model; the port must still answer within the timeout, and no start may take
 * more than HARD_CAP_FACTOR timeouts. An exit meanwhile is classified from the log.
 */
/** The first wait after llama-server printed something. */
const AFTER_OUTPUT_MS = 4;

export async function waitUntilHealthy(s: Spawned, opts: HealthWait): Promise<LaunchFailure | null> {
  let portAnswered = false;
  let fingerprint = workFingerprint(s.child.pid);
  let lastWork = s.t0;
  let lastLoadingEvent = 0;
  let pollWait = 10;
  const aborted = new Promise<void>((resolve) =>
    opts.signal.addEventListener("abort", () => resolve(), { once: true }),
  );
  for (;;) {
    if (s.exit) return await exitFailure(s, s.exit);
    if (opts.signal.aborted)
      return { error: opts.signal.reason ?? cancelledError("start abandoned"), retryPort: false };
    const now = Date.now();
    const fp = workFingerprint(s.child.pid);
    if (fp !== null && fp !== fingerprint) {
      fingerprint = fp;
      lastWork = now;
    }
    const late = startupOverdue(s, now, Math.max(lastWork, s.lastLine), portAnswered, opts.startupTimeoutMs);
    if (late) return { error: late, retryPort: false };
    s.spoke = false;
    const status = await healthStatus(s.baseUrl, Math.max(1000, opts.intervalMs * 10));
    if (status !== null) portAnswered = true;
    if (status === 200) return null;
    if (now - lastLoadingEvent >= 500) {
      lastLoadingEvent = now;
      opts.emit({ phase: "loading", elapsed_ms: now - s.t0 });
    }
    // Short waits first: a small model is ready in ~0.1 s (transcript 51). llama-server logs
    // as it becomes ready ("model loaded", "listening"), so output cuts the wait short, and
    // since /health may turn 200 a few ms after those lines, the waits start short again after
    // output (a flip missed here cost up to intervalMs, the worst cold chats in the bench).
    // A line while the poll was in flight ("listening", answered 503 a moment before the flip)
    // counts too: missed, the ready server waited out the backed-off interval.
    if (!spokeDuringPoll(s)) {
      // The line reader marks `spoke` before it nudges: the mark says whether output came.
      const output = new Promise<void>((resolve) => {
        s.nudge = resolve;
      });
      await Promise.race([Bun.sleep(Math.min(pollWait, opts.intervalMs)), s.exited, aborted, output]);
      s.nudge = undefined;
    }
    pollWait = spokeDuringPoll(s) ? AFTER_OUTPUT_MS : pollWait * 2;
  }
}

/** Read through a call: the reset before the poll would have TypeScript take it as false still. */
const spokeDuringPoll = (s: Spawned): boolean => s.spoke === true;

/** The start-up timeout's verdict: null while in time, else the error naming which bound broke. */
export function startupOverdue(
  s: Pick<Spawned, "t0" | "port" | "tail">,
  now: number,
  lastProgress: number,
  portAnswered: boolean,
  timeoutMs: number,
): CoreError | null {
  const stalled = now - lastProgress > timeoutMs;
  const neverOpened = !portAnswered && now - s.t0 > timeoutMs;
  const tooLong = now - s.t0 > timeoutMs * HARD_CAP_FACTOR;
  if (!stalled && !neverOpened && !tooLong) return null;
  const why = neverOpened
    ? `never answered on port ${s.port}`
    : stalled
      ? "made no progress"
      : `kept loading past ${HARD_CAP_FACTOR}× the start-up timeout`;
  return new CoreError(
    "internal_error",
    `llama-server did not become ready: it ${why} within ${timeoutMs / 1000} s (llama.startup_timeout_s)`,
    { log_tail: s.tail.last(TAIL_IN_ERRORS) },
  );
}

/** Longest an exit's verdict waits for the last log lines (a grandchild may hold the pipes open). */
const DRAIN_WAIT_MS = 2000;

async function exitFailure(s: Spawned, exit: Exit): Promise<LaunchFailure> {
  // A wrapper's shell gone, what it started still in its group holds the pipes: killed first (the
  // lines it wrote are still read), the drain is not waited out with it running on.
  if (s.child.groupLingers?.()) s.child.kill();
  // The verdict reads the log's last lines, which may come well after the exit: wait for the pipes.
  await Promise.race([s.drained, Bun.sleep(DRAIN_WAIT_MS)]);
  const why = (await modelGone(s.argv)) ?? classifyStartExit(s.tail.last(), exit.code, exit.signal);
  return {
    error: new CoreError(why.code, why.message, {
      exit_code: exit.code,
      signal: exit.signal,
      log_tail: s.tail.last(TAIL_IN_ERRORS),
    }),
    retryPort: why.retryPort,
    outOfMemory: why.outOfMemory,
  };
}

/**
 * Step 3: /health is public, so it cannot tell our child from another program on the port: a
 * protected route must refuse no key and accept ours. This also proves the child took our
 * key.
 */
export async function verifyOwnKey(
  s: Pick<Spawned, "baseUrl" | "apiKey" | "port" | "tail" | "exit">,
): Promise<LaunchFailure | null> {
  const [anonymous, keyCheck] = await Promise.all([
    modelsStatus({ baseUrl: s.baseUrl }, 5000),
    modelsStatus({ baseUrl: s.baseUrl, apiKey: s.apiKey }, 5000),
  ]);
  await Bun.sleep(0);
  // Our key refused: our child accepts it whatever keys extra_args add (transcripts/76b), so
  // another program with a key answers, such as another core's llama-server that took the port
  // between our pick and our child's bind.
  if (s.exit || keyCheck === 401 || (anonymous !== 401 && anonymous !== null)) {
    // Something else answers here (our child lost the bind race and exited, or is exiting).
    const inUse = new CoreError(
      "internal_error",
      `another program answers on 127.0.0.1:${s.port} (port in use)`,
      {
        log_tail: s.tail.last(TAIL_IN_ERRORS),
      },
    );
    return { error: inUse, retryPort: true };
  }
  if (keyCheck !== 200)
    logger.warn(`llama-server answered ${keyCheck ?? "nothing"} to GET /v1/models after ready`);
  return null;
}

/** The three steps in order; a failed step leaves no process behind, nor a record but for what outlived its kill. */
export async function launchOnce(req: SpawnRequest, wait: HealthWait): Promise<Spawned | LaunchFailure> {
  const spawned = spawnServer(req);
  if ("error" in spawned) return spawned;
  const failure = (await waitUntilHealthy(spawned, wait)) ?? (await verifyOwnKey(spawned));
  if (failure) {
    // Exited, a wrapper's shell may have left its llama-server running (in the background, or the
    // shell killed): its group is killed all the same.
    if (!spawned.exit || spawned.child.groupLingers?.()) await stopChild(spawned.child, 0);
    recordAfterStop(req.dataDir, req.instance, spawned.child); // kept while any of it outlives the kill
    return failure;
  }
  recordChild(req.dataDir, spawned, req.instance);
  return spawned;
}

/** How long after readiness llama-server has surely begun its task loop (see politeStopWait). */
const POLITE_AFTER_READY_MS = 100;

/**
 * How long a stop waits before its polite stop (ms, 0: at once). llama-server begins its task
 * loop a moment after /health turns 200, and that beginning undoes a polite stop that came first
 * (server_queue::start_loop sets `running` again): the stop would then wait for the signal or the
 * kill. So none in that first moment, unless the server has answered a task (a completion:
 * launch.ts `taskServed`), which only a loop already running gives.
 */
export function politeStopWait(readyAt: number, servedTask: boolean, now: number): number {
  return servedTask ? 0 : Math.max(0, POLITE_AFTER_READY_MS - (now - readyAt));
}

/**
 * The polite stop, then a kill after the grace period (a streaming llama-server ignores a polite
 * stop for up to its SSE ping interval, 30 s). A child that reads our stdin (`exitLine`: child
 * mode) gets the router's exit line first, alone for half the grace, then SIGTERM; on Windows,
 * with no polite signal, the line alone until the grace ends. Otherwise SIGTERM at once (on
 * Windows the tree killed: nothing gentler exists). A wrapper's shell may die of the SIGTERM before
 * its llama-server: that one has the rest of the grace (`groupEnds`), then the kill.
 */
export async function stopChild(
  child: ChildProcess,
  graceMs: number,
  exitLine = false,
  released?: Promise<boolean>,
): Promise<void> {
  const exited = child.exited.then(() => true);
  // Memory given back (`released`: supervisor.ts halt) is gone for the next start, ms before exit.
  const gone = released ? Promise.race([exited, released.then((r) => r || exited)]) : exited;
  const goneWithin = (ms: number) => Promise.race([gone, Bun.sleep(ms).then(() => false)]);
  if (graceMs > 0) {
    let signalAfterMs = 0;
    if (exitLine && child.writeLine(EXIT_LINE)) signalAfterMs = child.politeSignal ? graceMs / 2 : graceMs;
    if (signalAfterMs > 0 && (await goneWithin(signalAfterMs))) return;
    if (signalAfterMs < graceMs) {
      const deadline = Date.now() + graceMs - signalAfterMs;
      child.terminate();
      if ((await goneWithin(graceMs - signalAfterMs)) && (await groupEnds(child, deadline))) return;
    }
    logger.warn(`llama-server (pid ${child.pid}) ignored the polite stop for ${graceMs} ms; killing it`);
  }
  const killWaitMs = child.killWaitMs ?? KILL_WAIT_MS;
  const killedBy = Date.now() + killWaitMs;
  child.kill();
  await Promise.race([gone, Bun.sleep(killWaitMs)]);
  // A wrapper's shell reaped, the llama-server it started may still be exiting, its memory held
  // under the next start: its group's end is waited for as a leader's exit is.
  await groupEnds(child, killedBy);
}

/** The longest a stop waits for what it SIGKILLed to be gone. */
const KILL_WAIT_MS = 5000;
