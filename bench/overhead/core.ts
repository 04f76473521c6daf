import type { FileSink, Subprocess } from "bun";
import type { StreamTiming } from "./stream-timing.ts";

type Msg = { id?: unknown; type?: string; event?: string; [k: string]: unknown };

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

  /** llama-server's prompt_ms per trace id, from the core's info log (`trace=… timings={…}`). */
  private readonly promptMs = new Map<string, number>();

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
        timing: { sent, first: 0, last: 0, pieces: 0 },
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

  /** llama-server's prompt time for the chat with this trace id, once its log line is read (≤ 200 ms). */
  async promptMsOf(traceId: string): Promise<number | undefined> {
    for (let i = 0; i < 40 && !this.promptMs.has(traceId); i++) await Bun.sleep(5);
    return this.promptMs.get(traceId);
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
        const m = /trace=(\S+) step=0 .*timings=(\{.*\})/.exec(buffer.slice(0, nl));
        if (m) {
          const ms = (JSON.parse(m[2] as string) as { prompt_ms?: number }).prompt_ms;
          if (typeof ms === "number") this.promptMs.set(m[1] as string, ms);
        }
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
        if (p.timing.pieces === 0) p.timing.first = now;
        p.timing.last = now;
        if (p.timing.pieces++ > 0) return; // only the first chunk is a mark
      }
      p.events.push({ name: String(msg.event), at: now });
      return;
    }
    this.pending.delete(String(msg.id));
    p.resolve(msg);
  }
}
