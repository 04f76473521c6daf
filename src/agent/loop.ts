import type { AgentConfig, Config } from "../config/schema.ts";
import { type CompletionResult, streamCompletion } from "../llama/completion.ts";
import { LlmError } from "../llama/errors.ts";
import { contextSizeOf } from "../llama/props.ts";
import type { ChatEvents, ChatParams, ChatResult, Warning } from "../protocol/chat.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import type { RequestContext } from "../protocol/method-table.ts";
import type { LlamaLease, LlamaProvider, StartTicket } from "../runtime/endpoint.ts";
import { watchProgress } from "../runtime/watchdog.ts";
import type { Hit } from "../store/bm25.ts";
import type { ChatMessage, ToolCall } from "../store/chat-messages.ts";
import { dataDirError } from "../store/data-dir-problem.ts";
import type { KeyedMutex } from "../store/keyed-mutex.ts";
import type { MemoryIndex } from "../store/memory-index.ts";
import { type Checkpoint, SessionStore } from "../store/session-store.ts";
import { logger } from "../util/logger.ts";
import { estimateAll, estimateTokens, trimHistory } from "./context-budget.ts";
import type { McpPool } from "./mcp-pool.ts";
import { interpretStep } from "./tool-calls.ts";
import { type AgentTool, resolveTools, toOpenAiTools } from "./tool-registry.ts";
import { runTool } from "./tool-runner.ts";

export interface TurnDeps {
  config: Config;
  /** Absolute data directory. */
  dataDir: string;
  provider: LlamaProvider;
  pool: McpPool;
  locks: KeyedMutex;
  memory(userId: string): MemoryIndex;
  emit: RequestContext<ChatEvents>["emit"];
  signal: AbortSignal;
  /**
   * Claims the finish before the turn is committed to history: false when a cancel got there
   * first (the turn then ends `cancelled`, uncommitted, resumable from its checkpoint).
   */
  settle(): boolean;
  randomId(length: number, alphabet: string): string;
  now(): Date;
}

/** Context size assumed when neither llama-server nor the config says. */
const FALLBACK_CONTEXT = 4096;
const MEMORY_SNIPPET_CHARS = 600;
const OVERFLOW_RETRIES = 2;

export function pickAgent(config: Config, name: string | undefined): AgentConfig {
  const agents = config.agents;
  if (name === undefined) return agents[0] as AgentConfig;
  const agent = agents.find((a) => a.name === name);
  if (!agent) {
    throw new CoreError(
      "invalid_request",
      `params.agent: no agent named '${name}' (known: ${agents.map((a) => a.name).join(", ")})`,
      {
        field: "agent",
      },
    );
  }
  return agent;
}

/** One agent turn (SPEC §5). Returns the result without `dropped_events` (the method adds it). */
export async function runTurn(
  params: ChatParams,
  deps: TurnDeps,
): Promise<Omit<ChatResult, "dropped_events">> {
  const { config, signal } = deps;
  const agent = pickAgent(config, params.agent);
  const sessionId = params.session_id ?? deps.randomId(8, "abcdefghijklmnopqrstuvwxyz0123456789");
  const traceId = deps.randomId(16, "0123456789abcdef");
  // The model starts loading now, while the session, memory and tools are prepared; the turn
  // hears its progress once it asks for the server (after run_start, as the protocol orders).
  // The steps up to the spawn go first (on one thread, the turn's own work would otherwise
  // run between them); the turn's preparation then overlaps the load.
  const prestarted = deps.provider.prestart?.();
  if (prestarted) await untilSpawned(prestarted);
  const unlock = await deps.locks.lock(`${params.user_id}/${sessionId}`, signal);
  try {
    return await new Turn(params, deps, agent, sessionId, traceId, prestarted).run();
  } catch (err) {
    // A folder the core cannot write is the host's to fix: name it, not "see the log".
    throw dataDirError(err, deps.dataDir) ?? err;
  } finally {
    unlock();
  }
}

/** Longest a turn waits for the spawn before going on (a slow GPU probe must not hold run_start). */
const SPAWN_WAIT_MS = 50;

async function untilSpawned(ticket: StartTicket): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([ticket.spawned, new Promise<void>((r) => (timer = setTimeout(r, SPAWN_WAIT_MS)))]);
  clearTimeout(timer);
}

class Turn {
  private readonly warnings: Warning[] = [];
  private readonly store: SessionStore;
  private history: ChatMessage[] = [];
  private state!: Omit<Checkpoint, "version" | "updated_at">;
  private tools: AgentTool[] = [];
  private readonly maxSteps: number;
  /** The step being worked on, for loop_abort. */
  private currentStep = 0;
  /** The session's checkpoint as this turn found it, put back if the turn is refused. */
  private priorCheckpoint: Checkpoint | undefined;

  constructor(
    private readonly params: ChatParams,
    private readonly deps: TurnDeps,
    private readonly agent: AgentConfig,
    private readonly sessionId: string,
    private readonly traceId: string,
    private readonly prestarted: StartTicket | undefined,
  ) {
    this.store = new SessionStore(deps.dataDir, params.user_id, sessionId, deps.now);
    this.maxSteps = agent.max_steps ?? deps.config.app.max_steps;
  }

  async run(): Promise<Omit<ChatResult, "dropped_events">> {
    const { deps } = this;
    this.history = this.store.loadHistory(this.warnings);
    this.priorCheckpoint = this.store.loadCheckpoint(this.warnings);
    this.state = this.initialState(this.priorCheckpoint);
    this.currentStep = this.state.step;
    // Written now (a refused folder fails the chat before run_start, as always), made durable
    // once the first request is on its way: the fsyncs then overlap llama-server's prompt
    // processing instead of adding to the time to first token (docs/performance.md).
    this.store.stageCheckpoint(this.state);

    deps.emit("run_start", {
      user_input: this.state.user_input,
      trace_id: this.traceId,
      session_id: this.sessionId,
    });
    try {
      deps.emit("memory_start", {});
      const hits = this.recall();
      deps.emit("memory_done", { hits: hits.length });
      this.tools = await this.loadTools();
      deps.signal.throwIfAborted();
      // Waiting for llama-server to start, restart or wake: the host hears how it goes.
      const lease = await deps.provider.acquire(deps.signal, (p) => deps.emit("warmup_progress", p), {
        prestarted: this.prestarted,
      });
      try {
        return await this.loop(lease, hits);
      } finally {
        lease.release();
      }
    } catch (err) {
      // A turn that ends before its first request (cancelled while the model loads, no model)
      // leaves its checkpoint as before, for `resume`; the turn's own error is the one reported.
      try {
        this.store.commitStaged();
      } catch {}
      if (deps.signal.aborted) {
        deps.emit("loop_abort", { step: this.currentStep, reason: "cancelled" });
        throw deps.signal.reason;
      }
      throw err;
    }
  }

  private initialState(checkpoint: Checkpoint | undefined): Omit<Checkpoint, "version" | "updated_at"> {
    const fresh = {
      trace_id: this.traceId,
      user_input: this.params.input,
      agent: this.agent.name,
      step: 0,
      parse_errors: 0,
      best_text: "",
      turn: [{ role: "user" as const, content: this.params.input }],
    };
    if (this.params.resume) {
      if (checkpoint) {
        logger.info(`trace=${this.traceId} resuming turn ${checkpoint.trace_id} at step ${checkpoint.step}`);
        const { version: _v, updated_at: _u, ...rest } = checkpoint;
        return { ...rest, trace_id: this.traceId };
      }
      this.warnings.push({
        code: "nothing_to_resume",
        message: "resume was asked but the session has no interrupted turn; ran the input as a new turn",
      });
      return fresh;
    }
    if (checkpoint) {
      this.warnings.push({
        code: "checkpoint_discarded",
        message: `an interrupted turn ("${checkpoint.user_input.slice(0, 60)}") was discarded because this chat did not ask to resume it`,
      });
    }
    return fresh;
  }

  private recall(): Hit[] {
    const mem = this.deps.config.memory;
    if (!mem.enabled || mem.top_k === 0 || this.state.user_input.trim() === "") return [];
    try {
      return this.memory().search(this.state.user_input, mem.top_k, this.sessionId);
    } catch (err) {
      logger.warn(`trace=${this.traceId} memory search failed: ${(err as Error).message}`);
      return [];
    }
  }

  /** The user's memory; what it found wrong with its file (once per process) goes in the result. */
  private memory(): MemoryIndex {
    const index = this.deps.memory(this.params.user_id);
    this.warnings.push(...index.takeWarnings());
    return index;
  }

  private async loadTools(): Promise<AgentTool[]> {
    if (this.agent.tools.length === 0) return [];
    try {
      const { tools, failures } = await resolveTools(this.agent.tools, this.deps.pool, this.deps.signal);
      for (const f of failures) {
        this.warnings.push({
          code: "tools_unavailable",
          message: `the tools of MCP server '${f.server}' could not be loaded, the turn ran without them: ${f.message}`,
        });
      }
      return tools;
    } catch (err) {
      if (this.deps.signal.aborted) throw this.deps.signal.reason;
      if (err instanceof CoreError && err.code === "config_invalid") throw err;
      const message = (err as Error).message;
      this.warnings.push({
        code: "tools_unavailable",
        message: `tools could not be loaded, the turn ran without them: ${message}`,
      });
      return [];
    }
  }

  private async loop(lease: LlamaLease, hits: Hit[]): Promise<Omit<ChatResult, "dropped_events">> {
    const { deps, state } = this;
    const contextSize =
      (await contextSizeOf(lease, deps.signal)) ??
      (typeof deps.config.model.context === "number" ? deps.config.model.context : FALLBACK_CONTEXT);
    const maxTokens = this.agent.max_tokens ?? deps.config.model.max_tokens ?? undefined;
    const known = new Set(this.tools.map((t) => t.fn));
    const openAiTools = toOpenAiTools(this.tools);
    const system = this.systemMessage(hits);

    for (;;) {
      await this.runPendingTools(state.step - 1);
      if (state.step >= this.maxSteps)
        return this.abort("max_steps", `stopped after reaching the step limit of ${this.maxSteps} steps`);

      const step = state.step;
      this.currentStep = step;
      deps.emit("llm_start", { step });
      const reply = await this.complete(lease, step, system, openAiTools, contextSize, maxTokens);
      if (reply instanceof LlmError) return this.overflowed(step, reply, contextSize);
      deps.emit("llm_done", { step });
      logger.info(
        `trace=${this.traceId} step=${step} finish=${reply.finishReason} usage=${JSON.stringify(reply.usage ?? {})} timings=${JSON.stringify(reply.timings ?? {})}`,
      );

      const outcome = interpretStep(reply.content, reply.toolCalls, known, step);
      state.step = step + 1;
      if (outcome.text.trim() !== "") state.best_text = outcome.text;
      if (reply.finishReason === "length" && !reachedReplyCap(reply, maxTokens)) {
        // The slot is full: no room for a tool result or a re-prompt (and a call cut off here is
        // half written), so the turn ends with its text so far rather than an error.
        return this.contextFull(
          step,
          outcome.kind === "final" ? reply.content : state.best_text,
          `the reply filled the model's context (${contextSize} tokens per slot) and was cut off there; raise model.context or lower llama.parallel to give each slot more, or set model.max_tokens to keep replies shorter`,
        );
      }
      if (outcome.kind === "final") {
        state.turn.push({ role: "assistant", content: reply.content });
        if (reply.content.trim() === "") {
          // Defined, not retried: a model that says nothing once usually says nothing again.
          this.warnings.push({
            code: "empty_reply",
            message: "the model ended its turn without any text or tool call; the response is empty",
          });
        }
        if (reply.finishReason === "length") {
          // Only our own cap gets here; the slot filling up was handled above.
          this.warnings.push({
            code: "reply_truncated",
            message: `the reply was cut off at the reply limit of ${maxTokens} tokens`,
          });
        }
        deps.emit("final", { step, response: reply.content });
        return this.finish(reply.content);
      }
      if (outcome.kind === "calls") {
        state.turn.push({ role: "assistant", content: outcome.text || null, tool_calls: outcome.toolCalls });
        this.store.saveCheckpoint(state);
        continue;
      }
      state.parse_errors++;
      const what = this.reprompt(step, outcome, reply.content);
      if (state.parse_errors > deps.config.app.max_parse_errors) {
        return this.abort(
          "max_parse_errors",
          `stopped after ${state.parse_errors} malformed tool calls (limit ${deps.config.app.max_parse_errors} re-prompts): ${what}`,
        );
      }
      this.store.saveCheckpoint(state);
    }
  }

  /** A malformed tool call goes back to the model saying what was wrong; returns that. */
  private reprompt(
    step: number,
    outcome: { problems: string[]; toolCalls: ToolCall[]; text: string },
    content: string,
  ): string {
    const { state } = this;
    const what = outcome.problems.join("; ");
    logger.info(`trace=${this.traceId} step=${step} malformed tool call (${state.parse_errors}): ${what}`);
    if (outcome.toolCalls.length > 0) {
      state.turn.push({ role: "assistant", content: outcome.text || null, tool_calls: outcome.toolCalls });
      for (const tc of outcome.toolCalls) {
        state.turn.push({
          role: "tool",
          tool_call_id: tc.id,
          content: `Not run: the call was malformed (${what}). Fix it and call again.`,
        });
      }
    } else {
      state.turn.push({ role: "assistant", content });
      state.turn.push({
        role: "user",
        content: `Your tool call could not be used: ${what}. Write it again as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> with valid JSON, or answer without tools.`,
      });
    }
    return what;
  }

  /**
   * One LLM call. An overflow is retried with less history (halved, then none); when even the
   * prompt without history overflows, llama-server's error is returned for the loop to judge.
   */
  private async complete(
    lease: LlamaLease,
    step: number,
    system: ChatMessage,
    tools: unknown[],
    contextSize: number,
    maxTokens: number | undefined,
  ): Promise<CompletionResult | LlmError> {
    const { deps, state } = this;
    const reserve = maxTokens ?? Math.min(1024, Math.floor(contextSize / 4));
    let budget =
      contextSize - reserve - estimateTokens(system) - estimateAll(tools) - estimateAll(state.turn);
    for (let attempt = 0; ; attempt++) {
      const { kept, dropped } = trimHistory(this.history, Math.max(0, budget));
      if (dropped > 0)
        logger.debug(
          `trace=${this.traceId} step=${step} history trimmed: ${dropped} older messages left out`,
        );
      // Aborts on cancel, on the server's death, or when no byte arrives for request_timeout_s.
      const watch = watchProgress(lease, deps.signal);
      try {
        return await streamCompletion(
          lease,
          {
            messages: [system, ...kept, ...state.turn],
            ...(tools.length > 0 ? { tools } : {}),
            ...(this.agent.temperature !== undefined ? { temperature: this.agent.temperature } : {}),
            ...(this.agent.top_p !== undefined ? { top_p: this.agent.top_p } : {}),
            ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
          },
          watch.signal,
          (delta) => deps.emit("llm_chunk", { step, delta }),
          watch.touch,
          () => this.store.commitStaged(),
        );
      } catch (err) {
        if (deps.signal.aborted) throw deps.signal.reason;
        if (isCoreError(err)) {
          // The server died or wedged mid-request (the supervisor restarts it on the next chat).
          deps.emit("loop_abort", { step, reason: "llm_error" });
          throw new CoreError(err.code, err.message, { reason: "server_failed", trace_id: this.traceId });
        }
        if (!(err instanceof LlmError)) throw err;
        if (err.kind === "context_overflow") {
          if (kept.length === 0) return err;
          budget = attempt < OVERFLOW_RETRIES ? Math.floor(estimateAll(kept) / 2) : 0;
          continue;
        }
        if (err.kind === "connection_lost" || err.kind === "server_error") lease.reportFailure(err.message);
        deps.emit("loop_abort", { step, reason: "llm_error" });
        throw new CoreError("internal_error", err.message, {
          reason: err.kind,
          trace_id: this.traceId,
          ...err.data,
        });
      } finally {
        watch.dispose();
      }
    }
  }

  /** Runs the calls of the last assistant message that have no result yet (all of them, or the rest after a resume). */
  private async runPendingTools(step: number): Promise<void> {
    const { deps, state } = this;
    const lastAssistant = state.turn.findLastIndex((m) => m.role === "assistant");
    const msg = state.turn[lastAssistant];
    if (msg?.role !== "assistant" || !msg.tool_calls?.length) return;
    this.currentStep = Math.max(0, step);
    const answered = new Set(
      state.turn.slice(lastAssistant + 1).flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])),
    );
    for (const tc of msg.tool_calls) {
      if (answered.has(tc.id)) continue;
      const tool = this.tools.find((t) => t.fn === tc.function.name);
      let args: Record<string, unknown> = {};
      try {
        args = JSON.parse(tc.function.arguments || "{}");
      } catch {
        // Checked when the call was made; an unreadable checkpoint entry runs with no arguments.
      }
      const display = tool?.display ?? tc.function.name;
      deps.emit("tool_start", { step, tool: display, args });
      const outcome = tool
        ? await runTool(tool, args, deps.pool, this.params.approve_execution, deps.signal)
        : {
            status: "error" as const,
            content: `The tool ${display} is not available.`,
            preview: "tool not available",
            retryable: false,
            ms: 0,
          };
      deps.emit("tool_done", {
        step,
        tool: display,
        status: outcome.status,
        preview: outcome.preview,
        retryable: outcome.retryable,
        ms: outcome.ms,
      });
      state.turn.push({ role: "tool", tool_call_id: tc.id, content: outcome.content });
      this.store.saveCheckpoint(state);
    }
  }

  private systemMessage(hits: Hit[]): ChatMessage {
    if (hits.length === 0) return { role: "system", content: this.agent.system_prompt };
    const notes = hits
      .map(
        (h) =>
          `- (${h.doc.source}) ${h.doc.text.length > MEMORY_SNIPPET_CHARS ? `${h.doc.text.slice(0, MEMORY_SNIPPET_CHARS)}…` : h.doc.text}`,
      )
      .join("\n");
    return {
      role: "system",
      content: `${this.agent.system_prompt}\n\nNotes from memory that may be relevant (use them only if they help):\n${notes}`,
    };
  }

  private abort(
    reason: "max_steps" | "max_parse_errors",
    message: string,
  ): Omit<ChatResult, "dropped_events"> {
    this.deps.emit("loop_abort", { step: Math.max(0, this.state.step - 1), reason });
    this.warnings.push({ code: reason, message });
    // The best text stands in as the turn's answer so the history stays a valid conversation.
    this.state.turn.push({ role: "assistant", content: this.state.best_text });
    return this.finish(this.state.best_text);
  }

  /** The slot's context is full: the turn ends with the text so far, committed like any answer. */
  private contextFull(step: number, response: string, message: string): Omit<ChatResult, "dropped_events"> {
    logger.info(`trace=${this.traceId} step=${step} context full: ${message}`);
    this.warnings.push({ code: "context_full", message });
    this.state.turn.push({ role: "assistant", content: response });
    this.deps.emit("final", { step, response });
    return this.finish(response);
  }

  /**
   * The prompt overflowed even without history. Before the turn has done anything it is the
   * user's input that does not fit: refused (invalid_request) with the session left as it was.
   * Later it is the turn's own tool results or re-prompts: the turn ends like a full reply.
   */
  private overflowed(step: number, err: LlmError, contextSize: number): Omit<ChatResult, "dropped_events"> {
    const { n_prompt_tokens: promptTokens, n_ctx } = err.data;
    const slot = typeof n_ctx === "number" ? n_ctx : contextSize;
    const size = typeof promptTokens === "number" ? `${promptTokens} tokens` : "too many tokens";
    if (this.state.turn.length > 1) {
      this.deps.emit("llm_done", { step });
      return this.contextFull(
        step,
        this.state.best_text,
        `this turn's messages (${size}, its tool results included) no longer fit the model's context (${slot} tokens per slot), so it ends with the text so far; raise model.context or lower llama.parallel to give each slot more`,
      );
    }
    this.deps.emit("loop_abort", { step, reason: "context_overflow" });
    if (this.priorCheckpoint) {
      const { version: _v, updated_at: _u, ...before } = this.priorCheckpoint;
      this.store.saveCheckpoint(before);
    } else {
      this.store.clearCheckpoint();
    }
    throw new CoreError(
      "invalid_request",
      `the prompt does not fit the model's context even without the session's history: ${size}, a slot holds ${slot}; shorten the input, or raise model.context or lower llama.parallel`,
      {
        reason: "context_overflow",
        n_prompt_tokens: promptTokens ?? null,
        n_ctx: slot,
        trace_id: this.traceId,
      },
    );
  }

  private finish(response: string): Omit<ChatResult, "dropped_events"> {
    const { deps, state } = this;
    // A cancel that raced the last step wins only if it came before this point; after it, the
    // cancel finds the chat finished. Either way the host sees one consistent outcome.
    if (!deps.settle()) throw deps.signal.reason;
    this.store.saveHistory([...this.history, ...state.turn]);
    this.store.clearCheckpoint();
    if (deps.config.memory.enabled && state.user_input.trim() !== "") {
      try {
        this.memory().addTurn({
          id: this.traceId,
          session_id: this.sessionId,
          text: `${state.user_input}\n${response}`,
          at: deps.now().toISOString(),
        });
      } catch (err) {
        logger.warn(`trace=${this.traceId} memory update failed: ${(err as Error).message}`);
      }
    }
    return { response, session_id: this.sessionId, trace_id: this.traceId, warnings: this.warnings };
  }
}

/** Whether a length stop was our own reply cap rather than the slot's context filling up. */
function reachedReplyCap(reply: CompletionResult, maxTokens: number | undefined): boolean {
  if (maxTokens === undefined) return false;
  // Without usage the cap is the likelier cause: it is the limit we know was set.
  const completion = Number(reply.usage?.completion_tokens ?? Number.NaN);
  return !(completion < maxTokens);
}
