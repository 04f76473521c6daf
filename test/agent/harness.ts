import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { QuietSave } from "../../src/agent/kv/quiet-timer.ts";
import { methodTable } from "../../src/methods/index.ts";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
import { Dispatcher } from "../../src/protocol/dispatcher.ts";
import { Writer } from "../../src/protocol/transport/writer.ts";
import { CoreServices, type ServicesOptions } from "../../src/server/services.ts";
import { type Checkpoint, withInput } from "../../src/store/checkpoint.ts";
import { type InProcessOptions, LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { FakeProvider } from "../fixtures/llama-stand-in/provider.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

export const MCP_SERVER = join(import.meta.dir, "..", "fixtures", "mcp-test-server.ts");

export interface Msg {
  id: string | number | null;
  type: "event" | "result" | "error";
  event?: string;
  [k: string]: unknown;
}

/**
 * A core with the chat method wired to the SSE fake and the test MCP server, driven through
 * the real Dispatcher and Writer (an in-memory sink collects the output lines).
 */
export class ChatHarness {
  readonly dir = tmpdir("local-ai-chat-");
  readonly llama: LlamaStandIn;
  readonly provider: FakeProvider;
  readonly services: CoreServices;
  readonly out: Msg[] = [];
  readonly mcpLog: string;
  /** Prompt reuse's quiet saves, each as its timer was set (reuse-deps.ts `quietSeen`): awaited, or fired now. */
  readonly quietSaves: QuietSave[] = [];
  /** Called synchronously as the chat emits each event (before it is written), to place a race exactly. */
  onEmit: (msg: Msg) => void = () => {};
  private readonly dispatcher: Dispatcher;
  private waiters: (() => void)[] = [];

  constructor(
    config: Record<string, unknown> = {},
    options: {
      slots?: number;
      queueSize?: number;
      requestTimeoutMs?: number;
      /** The stand-in's own options (a model file, a slot folder, a slow save…), given the test's folder. */
      standIn?: (dir: string) => InProcessOptions;
      /** The store's test hooks (a 0.1 import held before a unit). */
      store?: ServicesOptions["store"];
      /** Prompt reuse's idle wait before its quiet save (default 2 s): tests that wait for that save shorten it. */
      reuseQuietMs?: number;
    } = {},
  ) {
    this.llama = new LlamaStandIn(options.standIn?.(this.dir.path));
    this.provider = new FakeProvider(this.llama, options.slots ?? 1, options.requestTimeoutMs);
    this.mcpLog = join(this.dir.path, "mcp-calls.log");
    const full = {
      app: { data_dir: "./data", max_parse_errors: 2, max_steps: 8 },
      agents: [{ name: "assistant", system_prompt: "You are a test.", tools: ["t.*"] }],
      mcp_servers: [
        {
          name: "t",
          command: process.execPath,
          args: [MCP_SERVER],
          env: { MCP_TEST_LOG: this.mcpLog },
          timeout_s: 20,
          requires_approval: ["write_note"],
        },
      ],
      memory: { enabled: true, top_k: 3 },
      ...config,
    };
    writeFileSync(join(this.dir.path, "config.yaml"), JSON.stringify(full));
    this.services = new CoreServices({
      configPath: join(this.dir.path, "config.yaml"),
      cwd: this.dir.path,
      llama: () => this.provider,
      ...(options.store ? { store: options.store } : {}),
      reuse: { quietMs: options.reuseQuietMs, quietSeen: (q) => this.quietSaves.push(q) },
    });
    const harness = this;
    let pending = "";
    const writer = new (class extends Writer {
      override event(msg: Parameters<Writer["event"]>[0]): boolean {
        harness.onEmit(msg as unknown as Msg);
        return super.event(msg);
      }
      override eventOf(id: unknown, event: string, fields: object): boolean {
        harness.onEmit({ ...fields, id, type: "event", event } as unknown as Msg);
        return super.eventOf(id, event, fields);
      }
    })(
      {
        write: (data) => {
          // A long line comes in slices (writer.ts, WRITE_SLICE_CHARS): whole lines only are read.
          const lines = (pending + data).split("\n");
          pending = lines.pop() ?? "";
          for (const line of lines) if (line) this.out.push(JSON.parse(line));
          const w = this.waiters;
          this.waiters = [];
          for (const f of w) f();
        },
      },
      { queueSize: options.queueSize ?? 4096 },
    );
    this.dispatcher = new Dispatcher(
      methodTable(this.services, { testMethods: false }),
      writer,
      async () => {},
    );
  }

  /**
   * The quiet save set as the last turn ended, fired now if its idle wait is not over (a test
   * gives a wait it never reaches, so the save comes after what it arranged), and done.
   */
  async quietSave(): Promise<void> {
    const quiet = this.quietSaves.at(-1);
    if (!quiet) throw new Error("no quiet save was set");
    quiet.now();
    await quiet.ran;
  }

  get dataDir(): string {
    return join(this.dir.path, "data");
  }

  /** The session's history as the model sees it (empty when it has none). */
  history(session: string, user = "default_user"): ChatMessage[] {
    return this.services.store().conversations.history(user, session);
  }

  /** The session's checkpoint, parsed (a long input kept apart put back), or undefined. */
  checkpoint(session: string, user = "default_user"): Checkpoint | undefined {
    const c = this.services.store().conversations;
    const body = c.checkpoint(user, session);
    if (body === undefined) return undefined;
    return withInput(JSON.parse(body), () => c.checkpointInput(user, session)) as Checkpoint;
  }

  /** Writes a checkpoint as an interrupted turn would have left it. */
  writeCheckpoint(session: string, checkpoint: Checkpoint, user = "default_user"): void {
    const c = this.services.store().conversations;
    c.ensureSession(user, session, checkpoint.agent, checkpoint.user_input, new Date());
    c.saveCheckpoint(user, session, JSON.stringify(checkpoint), new Date());
  }

  send(id: string | number, method: string, params: Record<string, unknown> = {}): void {
    this.dispatcher.handleLine(JSON.stringify({ id, method, params }));
  }

  /** Waits until a message matching `pred` has been written. */
  async waitFor(pred: (m: Msg) => boolean, timeoutMs = 20_000): Promise<Msg> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.out.find(pred);
      if (found) return found;
      if (Date.now() > deadline)
        throw new Error(`timed out; output so far: ${JSON.stringify(this.out).slice(0, 2000)}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  terminal(id: string | number, timeoutMs?: number): Promise<Msg> {
    return this.waitFor((m) => m.id === id && m.type !== "event", timeoutMs);
  }

  events(id: string | number): Msg[] {
    return this.out.filter((m) => m.id === id && m.type === "event");
  }

  /** Runs one chat to its terminal message. */
  async chat(
    id: string | number,
    params: Record<string, unknown>,
  ): Promise<{ terminal: Msg; events: Msg[] }> {
    this.send(id, "chat", params);
    const terminal = await this.terminal(id);
    return { terminal, events: this.events(id) };
  }

  /** The stop's first step, as a shutdown takes it: chats cancelled, `stopping` aborted, answers waited for. */
  /** The core's stop as serve-stdio begins it; `graceMs` 0 ends work `cancel` cannot reach at once. */
  stopRequests(graceMs?: number): Promise<void> {
    return this.dispatcher.stopAll(graceMs);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.dispatcher.stopAll();
    await this.services.stop();
    this.llama.stop();
    this.dir[Symbol.dispose]();
  }
}

export function names(events: Msg[]): string[] {
  return events.map((e) => e.event as string);
}

/**
 * The events' names with each run of `llm_chunk` (or `llm_reasoning`) as one: how many a stream
 * takes depends on how close its tokens came (docs/protocol.md#joined-pieces), their order does not.
 */
export function streamNames(events: Msg[]): string[] {
  return names(events).filter(
    (n, i, all) => !(n === all[i - 1] && (n === "llm_chunk" || n === "llm_reasoning")),
  );
}

/** The text of a chat's `event` deltas, joined. */
export function streamed(events: Msg[], event = "llm_chunk"): string {
  return events
    .filter((e) => e.event === event)
    .map((e) => e.delta)
    .join("");
}
