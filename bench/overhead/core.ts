import type { FileSink, Subprocess } from "bun";
import type { StreamTiming } from "./stream-timing.ts";

type Msg = { id?: unknown; type?: string; event?: string; [k: string]: unknown };

/** A first step as the core's info log told it: prompt_ms, and when (epoch ms) the request was written and its first token read. */
interface LoggedStep {
  promptMs?: number;
  written?: number;
  first?: number;
}

/**
 * A chat's first step from the core's info log line (src/agent/turn/turn.ts `logStep`): its
 * trace id, llama-server's prompt_ms and, from builds that log them (`at=`), when the request
 * was written and its first token read; undefined for any other line.
 */
export function firstStepOf(line: string): (LoggedStep & { traceId: string }) | undefined {
  const m = /trace=(\S+) step=0 .*timings=(\{[^}]*\})(?: at=(\{[^}]*\}))?/.exec(line);
  if (!m) return undefined;
  const timings = JSON.parse(m[2] as string) as { prompt_ms?: number };
  const at = JSON.parse(m[3] ?? "{}") as { request_written?: number; first_token?: number };
  return {
    traceId: m[1] as string,
    promptMs: timings.prompt_ms,
    written: at.request_written,
    first: at.first_token,
  };
}

/** One request's messages as they arrived, each with its arrival time. */
interface Pending {
  sent: number;
  /** The event whose arrivals are timed: `llm_chunk`, or `llm_reasoning` for a thinking model. */
  piece: string;
  events: { name: string; at: number }[];
  timing: StreamTiming;
  resolve: (terminal: Msg) => void;
}

/** A chat through the core: its stream, and when each earlier event arrived (ms after sending). */
export interface CoreChat extends StreamTiming {
  marks: Record<string, number>;
  terminal: Msg;
}

/**
 * The compiled core (`dist/local-ai serve-stdio`) as a host drives it: NDJSON over pipes,
 * each protocol line parsed as it arrives and stamped with the time its read returned.
 */
export class CoreProcess {
  private readonly pending = new Map<string, Pending>();
  private readonly stdin: FileSink;
  private nextId = 0;

  /** A first step's line in the core's info log, per trace id (`trace=… timings={…} at={…}`). */
  private readonly steps = new Map<string, LoggedStep>();

  constructor(private readonly proc: Subprocess<"pipe", "pipe", "pipe">) {
    this.stdin = proc.stdin;
    void this.read();
    void this.readLog(); // also drains it, so a chatty log never blocks the core
  }

  static spawn(binary: string, cwd: string, configPath: string): CoreProcess {
    return CoreProcess.spawnCommand([binary, "serve-stdio", "--config", configPath], cwd);
  }

  /** Any program that speaks the bench's subset of the protocol (the bare relay, relay.ts). */
  static spawnCommand(argv: string[], cwd: string): CoreProcess {
    const proc = Bun.spawn(argv, {
      cwd,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      // info: one line per step, after its reply, with llama-server's timings.
      env: { ...process.env, LOCAL_AI_LOG_LEVEL: process.env.LOCAL_AI_LOG_LEVEL ?? "info" },
    });
    return new CoreProcess(proc);
  }

  /** Sends one request; resolves with its terminal message and its events' timings. */
  request(method: string, params?: unknown, piece = "llm_chunk"): Promise<CoreChat> {
    const id = `b${this.nextId++}`;
    return new Promise((resolve) => {
      const sent = performance.now();
      const p: Pending = {
        sent,
        piece,
        events: [],
        timing: { sent, first: 0, last: 0, pieces: 0, chars: 0, firstChars: 0 },
        resolve: (terminal) => {
          const marks: Record<string, number> = {};
          for (const e of p.events) marks[e.name] ??= e.at - sent;
          resolve({ ...p.timing, marks, terminal });
        },
      };
      this.pending.set(id, p);
      this.stdin.write(`${JSON.stringify({ id, method, ...(params ? { params } : {}) })}\n`);
      this.stdin.flush();
    });
  }

  /**
   * What the log said of a chat's first step, once its line is read (≤ 200 ms), with the core's
   * own time on its first token (`chat`'s sent and first, on this process's clock, against the
   * log's epoch times).
   */
  async stepOf(
    traceId: string,
    chat?: StreamTiming,
  ): Promise<(LoggedStep & Pick<StreamTiming, "own">) | undefined> {
    for (let i = 0; i < 40 && !this.steps.has(traceId); i++) await Bun.sleep(5);
    const step = this.steps.get(traceId);
    if (!step || !chat || step.written === undefined || step.first === undefined) return step;
    const epoch = (t: number) => performance.timeOrigin + t;
    return {
      ...step,
      own: { before: step.written - epoch(chat.sent), after: epoch(chat.first) - step.first },
    };
  }

  async shutdown(): Promise<number> {
    await this.request("shutdown");
    return await this.proc.exited;
  }

  get pid(): number {
    return this.proc.pid;
  }

  kill(): void {
    this.proc.kill();
  }

  private async read(): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const bytes of this.proc.stdout) {
      const now = performance.now();
      buffer += decoder.decode(bytes, { stream: true });
      let nl = buffer.indexOf("\n");
      while (nl !== -1) {
        this.onLine(JSON.parse(buffer.slice(0, nl)) as Msg, now);
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf("\n");
      }
    }
  }

  private async readLog(): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const bytes of this.proc.stderr) {
      buffer += decoder.decode(bytes, { stream: true });
      let nl = buffer.indexOf("\n");
      while (nl !== -1) {
        const step = firstStepOf(buffer.slice(0, nl));
        if (step) this.steps.set(step.traceId, step);
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf("\n");
      }
    }
  }

  private onLine(msg: Msg, now: number): void {
    const p = this.pending.get(String(msg.id));
    if (!p) return;
    if (msg.type === "event") {
      if (msg.event === p.piece) {
        const chars = typeof msg.delta === "string" ? msg.delta.length : 0;
        if (p.timing.pieces === 0) [p.timing.first, p.timing.firstChars] = [now, chars];
        p.timing.last = now;
        p.timing.chars += chars;
        if (p.timing.pieces++ > 0) return; // only the first chunk is a mark
      }
      p.events.push({ name: String(msg.event), at: now });
      return;
    }
    this.pending.delete(String(msg.id));
    p.resolve(msg);
  }
}
