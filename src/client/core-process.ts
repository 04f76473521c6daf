import { type ChildProcess, spawn as nodeSpawn, type SpawnOptions } from "node:child_process";
import { LineSplitter } from "../protocol/transport/framing.ts";
import { MAX_TIMER_MS, timerMs } from "../util/timer-limit.ts";
import type { Environment, ExitInfo, SpawnFunction } from "./host-types.ts";
import { DASH_REFUSAL, shellRefusedForeign, spawnFailure, spawnOrFail } from "./spawn-failure.ts";

/**
 * The edge that owns one core child process: it spawns it, frames its stdout into lines,
 * keeps a bounded tail of its stderr, and reports its end once. Node APIs only, so the
 * client runs in a Node or Electron main process.
 */

export interface CoreProcessHandlers {
  /** `cut`: its last line, without its newline, read as its output ended (it died writing it?). */
  onLine(line: string, cut: boolean): void;
  /** A line over maxLineBytes, dropped: its size and its first bytes (its id); `cut` as onLine's. */
  onOversizeLine(bytes: number, head: string, cut: boolean): void;
  onStderrLine(line: string): void;
  onExit(info: ExitInfo): void;
  /** Its stdout closed while it runs on: it can no longer answer anything. */
  onOutputClosed(): void;
  /** Its stdin closed while it runs on: it can no longer be asked anything. */
  onInputClosed(): void;
  /** Its stdin has not drained for `inputStallMs`: it reads nothing, so it is hung. */
  onInputStalled(stalledMs: number, queuedBytes: number): void;
  /** It has not exited `waitedMs` after its SIGKILL: gone() no longer waits for it. */
  onKillIgnored(waitedMs: number): void;
}

/** What became of a line handed to write(). */
export type WriteResult =
  | { kind: "written" }
  /** The process's input is already gone. */
  | { kind: "closed" }
  /** Not written: MAX_QUEUED_INPUT_BYTES already wait for the core to read them. */
  | { kind: "backlog"; queuedBytes: number };

/**
 * The most bytes of requests kept waiting for a core that does not read them; past it new
 * requests are refused (`core_backlog`) rather than held in the host's memory.
 */
export const MAX_QUEUED_INPUT_BYTES = 64 * 1024 * 1024;

/** The longest stderr line held whole; of a longer one only its first bytes are kept. */
const MAX_STDERR_LINE_BYTES = 64 * 1024;

export interface CoreProcessOptions {
  command: string;
  args: string[];
  cwd?: string;
  env?: Environment;
  maxLineBytes: number;
  stderrTailLines: number;
  /** How long stdin may stay undrained before the core is taken for hung; 0 = never. */
  inputStallMs: number;
  spawn?: SpawnFunction;
}

/**
 * How long after its SIGKILL a process that has not exited is waited for. One in uninterruptible
 * sleep (its data folder on a NAS gone away, a hung driver) takes no signal until its I/O
 * returns, if ever: a stop that waited for its exit never ended, nor did the app quitting on it.
 */
export const KILLED_EXIT_WAIT_MS = 5000;

/** How long to wait for stdout to finish after the exit event before giving up on it. */
const CLOSE_GRACE_MS = 1000;
/**
 * How long stdout may be closed before the exit event is due: a process that exits closes it
 * first, and its exit event follows within milliseconds. Past this the process runs on mute.
 */
const OUTPUT_CLOSED_CHECK_MS = 500;

export class CoreProcess {
  private readonly child: ChildProcess;
  private readonly stderrLines: string[] = [];
  private exited: ExitInfo | undefined;
  /** Set by retire(). */
  retired = false;
  private exitWaiters: ((info: ExitInfo) => void)[] = [];
  /** Set KILLED_EXIT_WAIT_MS after a SIGKILL it outlived: gone() resolves at once. */
  private killIgnored = false;
  private killWait: ReturnType<typeof setTimeout> | undefined;
  /**
   * Its exit event came: it is dead, only its pipes are still being read (a grandchild may hold
   * one, CLOSE_GRACE_MS at most). Not a process that outlived its SIGKILL.
   */
  private exitNoticed = false;
  private goneWaiters: (() => void)[] = [];
  /** stop() has begun: it ends by itself, killed at the latest after its grace. */
  stopping = false;
  /** Of what write() queued, in writableLength's units: with it, what the core has read since. */
  private queuedUnits = 0;
  /** stop()'s kill after its grace. */
  private stopTimer: ReturnType<typeof setTimeout> | undefined;
  /** Set while stdin holds data the core has not read: fires onInputStalled. */
  private stallTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly options: CoreProcessOptions,
    private readonly handlers: CoreProcessHandlers,
  ) {
    // A replacement spawn returns a ChildProcess too (SpawnFunction says so; its type stays
    // free of @types/node for hosts that type-check without it).
    const spawn = (options.spawn ?? nodeSpawn) as (c: string, a: string[], o: SpawnOptions) => ChildProcess;
    // windowsHide: a GUI host must not flash a console window for the core.
    this.child = spawnOrFail(() =>
      spawn(options.command, options.args, {
        cwd: options.cwd,
        env: options.env,
        stdio: ["pipe", "pipe", "pipe"],
        windowsHide: true,
      }),
    );
    this.wire();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** How the process ended; undefined while it runs. */
  get exitInfo(): ExitInfo | undefined {
    return this.exited;
  }

  get running(): boolean {
    return this.exited === undefined;
  }

  /** The last lines of its stderr, for error reports. */
  get stderrTail(): string[] {
    return [...this.stderrLines];
  }

  /** Writes one protocol line, unless stdin is gone or too much already waits in it. */
  write(line: string): WriteResult {
    const stdin = this.child.stdin;
    if (!this.running || !stdin || stdin.destroyed || !stdin.writable) return { kind: "closed" };
    if (stdin.writableLength >= MAX_QUEUED_INPUT_BYTES)
      return { kind: "backlog", queuedBytes: stdin.writableLength };
    const before = stdin.writableLength;
    const flowing = stdin.write(`${line}\n`);
    this.queuedUnits += stdin.writableLength - before;
    if (!flowing) this.watchDrain();
    return { kind: "written" };
  }

  /**
   * Stdin is full: the core must read some of it within each inputStallMs, or it is taken for
   * hung. Progress, not emptiness: a busy core reading a burst slowly is not hung.
   */
  private watchDrain(): void {
    const stdin = this.child.stdin;
    const ms = this.options.inputStallMs;
    // 0, or more than a timer holds (Infinity for "no limit"), checks nothing: such a timer fired
    // at once and took a core that had not read a burst within 1 ms for hung.
    if (this.stallTimer || !stdin || !(ms > 0) || ms > MAX_TIMER_MS) return;
    // What the core has read of what was queued, in the units writableLength counts.
    const taken = () => this.queuedUnits - stdin.writableLength;
    let seen = taken();
    const drained = () => {
      clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
    };
    stdin.once("drain", drained);
    const check = () => {
      this.stallTimer = undefined;
      if (!this.running || stdin.writableLength === 0) return void stdin.off("drain", drained);
      if (taken() > seen) {
        seen = taken();
        this.stallTimer = setTimeout(check, ms);
        this.stallTimer.unref?.();
        return;
      }
      stdin.off("drain", drained);
      this.handlers.onInputStalled(ms, stdin.writableLength);
    };
    this.stallTimer = setTimeout(check, ms);
    this.stallTimer.unref?.();
  }

  /** Closes stdin: the core treats end of input as a shutdown. */
  endInput(): void {
    this.child.stdin?.end();
  }

  /** The client gave up on it (its initialize failed) and killed it: its exit is expected. */
  retire(): void {
    this.retired = true;
    this.kill("SIGKILL");
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (!this.running) return;
    this.child.kill(signal);
    if (signal === "SIGKILL" && !this.killWait && !this.killIgnored && !this.exitNoticed)
      this.killWait = setTimeout(() => {
        this.killIgnored = true;
        this.letGo();
        this.handlers.onKillIgnored(KILLED_EXIT_WAIT_MS);
        for (const w of this.goneWaiters.splice(0)) w();
      }, KILLED_EXIT_WAIT_MS);
    // Its process, while it runs, holds the host open already.
    this.killWait?.unref?.();
  }

  /**
   * Stops a core that can no longer be asked to: closes its stdin (the core treats end of input
   * as a shutdown), sends `signal` if given, and kills it if it still runs after `graceMs`.
   */
  stop(graceMs: number, signal?: NodeJS.Signals): void {
    if (!this.running) return;
    this.stopping = true;
    this.endInput();
    if (signal) this.kill(signal);
    // The first stop's kill stands. Cleared at its exit: it held this object for the grace (24.8
    // days for stopGraceMs Infinity), one more per restart.
    this.stopTimer ??= setTimeout(() => this.kill("SIGKILL"), timerMs(graceMs));
    // The host may exit meanwhile: the client's exit hook kills the core then.
    this.stopTimer.unref?.();
  }

  /**
   * Given up on: the child and its pipes, still referenced, kept a Node host's event loop alive
   * after close() resolved (a CLI host never exited). Their events still come while it runs.
   */
  private letGo(): void {
    const { child } = this;
    child.unref?.();
    for (const pipe of [child.stdin, child.stdout, child.stderr])
      (pipe as { unref?: () => void } | null)?.unref?.();
  }

  /**
   * Resolves once the process has ended, or KILLED_EXIT_WAIT_MS after a SIGKILL it outlived:
   * what a stop waits for, which must end whatever the process does.
   */
  gone(): Promise<void> {
    if (this.exited || this.killIgnored) return Promise.resolve();
    return new Promise((resolve) => this.goneWaiters.push(resolve));
  }

  /** Resolves with the exit info once the process has ended (at once when it has). */
  waitForExit(): Promise<ExitInfo> {
    if (this.exited) return Promise.resolve(this.exited);
    return new Promise((resolve) => this.exitWaiters.push(resolve));
  }

  private wire(): void {
    const { child } = this;
    const splitter = new LineSplitter(this.options.maxLineBytes);
    const errSplitter = new LineSplitter(MAX_STDERR_LINE_BYTES);
    let exitSeen: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let stdoutClosed = false;
    let stderrClosed = false;
    // Its pipes close in no set order: stderr may hold its last lines (why it stopped, a shell's
    // "Syntax error") after stdout closed and the exit came.
    const pipesClosed = () => (stdoutClosed || !child.stdout) && (stderrClosed || !child.stderr);
    let spoke = false;
    const deliver = (frames: ReturnType<LineSplitter["push"]>, cut = false) => {
      for (const frame of frames) {
        spoke = true;
        if (frame.kind === "line") this.handlers.onLine(frame.text, cut);
        else this.handlers.onOversizeLine(frame.bytes, frame.head, cut);
      }
    };
    child.stdout?.on("data", (chunk: Buffer) => deliver(splitter.push(chunk)));
    child.stdout?.on("error", () => {});
    let dashRefused = false;
    const stderrFrame = (frame: ReturnType<LineSplitter["push"]>[number]) => {
      if (frame.kind !== "line") return this.stderrLine(cutStderrLine(frame.head, frame.bytes));
      dashRefused ||= DASH_REFUSAL.test(frame.text);
      this.stderrLine(frame.text);
    };
    child.stderr?.on("data", (chunk: Buffer) => {
      for (const frame of errSplitter.push(chunk)) stderrFrame(frame);
    });
    child.stderr?.on("error", () => {});
    child.stderr?.on("close", () => {
      stderrClosed = true;
      if (exitSeen && pipesClosed()) finish();
    });
    // A core that died leaves a broken pipe: writes fail with EPIPE, which is reported by exit.
    // One that closed its stdin and runs on gets no exit: Node then takes every write as
    // unsendable, and what was written would wait for good. Told apart as a closed stdout is.
    child.stdin?.on("error", () => {
      const check = () => !exitSeen && !this.stopping && this.handlers.onInputClosed();
      if (!exitSeen) setTimeout(check, OUTPUT_CLOSED_CHECK_MS).unref?.();
    });
    const finish = (extra: Partial<ExitInfo> = {}) => {
      if (this.exited) return;
      deliver(splitter.end(), true);
      for (const frame of errSplitter.end()) stderrFrame(frame);
      const foreign = !spoke ? shellRefusedForeign(this.options, exitSeen?.code, dashRefused) : undefined;
      this.exited = {
        code: exitSeen?.code ?? null,
        signal: exitSeen?.signal ?? null,
        stderrTail: [...this.stderrLines],
        ...(foreign ? { spawnError: foreign } : {}),
        ...extra,
      };
      this.handlers.onExit(this.exited);
      this.released(this.exited);
    };
    child.stdout?.on("close", () => {
      stdoutClosed = true;
      if (exitSeen && pipesClosed()) finish();
      else setTimeout(() => !exitSeen && this.handlers.onOutputClosed(), OUTPUT_CLOSED_CHECK_MS).unref?.();
    });
    child.on("exit", (code, signal) => {
      exitSeen = { code, signal };
      // Dead: gone() waits for its pipes (bounded below), never warns that it still runs.
      this.exitNoticed = true;
      clearTimeout(this.killWait);
      // The last lines may still sit in the pipes: wait for both to close, briefly (a
      // grandchild that inherited one must not keep the exit from being noticed).
      if (pipesClosed()) finish();
      else setTimeout(() => finish(), CLOSE_GRACE_MS).unref?.();
    });
    child.on("error", (err: NodeJS.ErrnoException) => {
      // Spawn failures come here without an exit event; errors after a spawn are followed by exit.
      if (child.pid === undefined) finish({ spawnError: spawnFailure(err, this.options) });
    });
  }

  /** Its end, to those who wait for it. */
  private released(info: ExitInfo): void {
    clearTimeout(this.killWait);
    clearTimeout(this.stopTimer);
    for (const w of this.exitWaiters.splice(0)) w(info);
    for (const w of this.goneWaiters.splice(0)) w();
  }

  private stderrLine(line: string): void {
    this.stderrLines.push(line);
    if (this.stderrLines.length > this.options.stderrTailLines) this.stderrLines.shift();
    this.handlers.onStderrLine(line);
  }
}

/**
 * A stderr line over MAX_STDERR_LINE_BYTES, as its head (its bytes past it never held): dropped
 * whole, the line that said why the core crashed (a long panic, a dump) never reached the host.
 */
function cutStderrLine(head: string, bytes: number): string {
  return `${head}… (cut: the line was ${bytes} bytes, over ${MAX_STDERR_LINE_BYTES})`;
}
