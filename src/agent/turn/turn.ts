import type { LlmError } from "../../llama/errors.ts";
import { breakDeep, markerBreaker } from "../../llama/special-text.ts";
import type { CompletionResult } from "../../llama/stream-reply.ts";
import type { ChatMessage } from "../../protocol/chat-message.ts";
import type { LlamaLease, StartTicket } from "../../runtime/endpoint.ts";
import type { MemoryHit as Hit } from "../../store/memory-store.ts";
import { logger } from "../../util/logger.ts";
import { emptyRecord } from "../kv/prompt-record.ts";
import type { ReusedTurn } from "../kv/reuse.ts";
import { emptyTurnSlot } from "../kv/slot-clear.ts";
import { interpretStep } from "../tool-calls.ts";
import { type AgentTool, toOpenAiTools, toolNameOf } from "../tool-registry.ts";
import { type AnswerCheck, AnswerFormat, isFormatRefused } from "./answer-format.ts";
import { begin, type TurnContext, warmup } from "./context.ts";
import { endTurn, type TurnEnding, type TurnResult } from "./ending.ts";
import { notVision, refsOf } from "./images.ts";
import { llmStep, type StepSetup } from "./llm-step.ts";
import { dropErased, recall, stillStored } from "./memory.ts";
import { repromptMessages, systemMessage, UNREADABLE, unreadableMessages } from "./prompt.ts";
import { PromptLayout } from "./prompt-layout.ts";
import { dropKnownRefused } from "./tool-refusals.ts";
import { loadTools, pendingCalls, runCalls } from "./tools.ts";
import { overflowingTools } from "./tools-cost.ts";
import { turnSlot } from "./turn-slot.ts";

/** Image data a turn held past which it asks for a collection once over (docs/performance.md, "Images"). */
const COLLECT_AFTER_IMAGE_BYTES = 4 * 1024 * 1024;

/** Context size assumed when neither llama-server nor the config says. */
const FALLBACK_CONTEXT = 4096;

/**
 * One agent turn, from run_start to its ending: memory, tools, the lease on a slot, then
 * steps (an LLM call, the tool calls it asked for) until one of them decides how it ends.
 */
export class Turn {
  private tools: AgentTool[] = [];
  /** The function names of `tools`: a call naming another is malformed. */
  private known: ReadonlySet<string> = new Set();
  private lease: LlamaLease | undefined;
  /** The session's slot and prompt record (agent/kv/), and the prompt laid out from it. */
  private reused: ReusedTurn | undefined;
  private layout: PromptLayout | undefined;
  /** A request went out: the slot holds this turn's prompt now. */
  private sent = false;
  /** llama-server answered one: what the slot held before this turn is surely replaced. */
  private read = false;
  private readonly maxSteps: number;
  /** The chat's `response_format`: its answer is constrained and checked. */
  private readonly format: AnswerFormat | undefined;
  /** With tools and a format, the model's free answer is asked for again, under the schema. */
  private answering = false;
  /**
   * A format with tools: the steps before the answer run free ("think freely, then answer to the
   * schema"), so a limit can end them and ask for the answer. Without tools every step is the
   * constrained one, and the limits end it.
   */
  private freeSteps = false;

  constructor(
    private readonly ctx: TurnContext,
    private readonly prestarted: StartTicket | undefined,
  ) {
    this.maxSteps = ctx.agent.max_steps ?? ctx.deps.config.app.max_steps;
    const format = ctx.params.response_format;
    this.format = format ? new AnswerFormat(format) : undefined;
  }

  async run(): Promise<TurnResult> {
    const { ctx } = this;
    ctx.deps.emit("run_start", {
      user_input: ctx.session.state.user_input,
      trace_id: ctx.traceId,
      session_id: ctx.sessionId,
    });
    let committed = false;
    let ending: TurnEnding | undefined;
    try {
      ending = await this.play();
      // Ended while the lease is held: the next chat waiting for the slot comes after this one.
      const result = await endTurn(ctx, ending);
      committed = true;
      return result;
    } finally {
      const lost = !committed && ctx.session.leaseLost(); // taken over: its slot's tokens are not saved
      this.reused?.end(this.layout && this.recordLeft(ending, committed), this.sent, lost);
      this.lease?.release();
      if (ctx.session.images.heldBytes() >= COLLECT_AFTER_IMAGE_BYTES) setTimeout(() => Bun.gc(true), 0);
    }
  }

  /**
   * The prompt record the turn leaves. A refused one (its own input does not fit, or its
   * images or format cannot be used) leaves the session as it was (ending.ts), its record too:
   * its retries without history said nothing of the history, and keeping their cut would send
   * every later turn without the conversation before it. Its notes a request put in the slot are held.
   */
  private recordLeft(ending: TurnEnding | undefined, committed: boolean) {
    const refused = ending?.kind === "context_overflow" || ending?.kind === "refused";
    const layout = this.layout as PromptLayout;
    return refused && this.reused
      ? layout.unchanged(this.reused.record, this.sent, this.read)
      : layout.record(committed, this.sent, this.read);
  }

  /** From memory recall to the last step: how the turn ends, a cancel or a failure included. */
  private async play(): Promise<TurnEnding> {
    const { ctx } = this;
    const { deps } = ctx;
    try {
      this.format?.prepare(); // compiled on its thread meanwhile, awaited before the first step
      begin(deps, "memory_start", {});
      const hits = await recall(ctx);
      ctx.sources = hits.map((h) => h.cite);
      deps.emit("memory_done", { hits: hits.length, sources: ctx.sources });
      this.tools = await loadTools(ctx);
      this.known = new Set(this.tools.map((t) => t.fn));
      deps.signal.throwIfAborted();
      // Before the server's lease: a schema no answer can pass waits for no load, holds no slot.
      const refused = await this.format?.refusal(deps.signal);
      if (refused) return { kind: "refused", step: ctx.step, error: refused };
      // Waiting for llama-server to start, restart or wake: the host hears how it goes.
      this.lease = await deps.provider.acquire(deps.signal, warmup(deps), {
        prestarted: this.prestarted,
      });
      const props = await this.lease.launch.props(deps.signal);
      const vision = props?.modalities?.vision;
      // Nothing is sent with images the model cannot read (docs/protocol.md#images).
      if (vision === false && refsOf(ctx.session.state.turn).length > 0)
        return { kind: "refused", step: ctx.step, error: notVision() };
      return await this.steps(await this.setup(this.lease, hits, vision !== false, props?.markers ?? []));
    } catch (err) {
      return deps.signal.aborted ? { kind: "cancelled" } : { kind: "failed", error: err };
    }
  }

  private async setup(
    lease: LlamaLease,
    hits: Hit[],
    vision: boolean,
    markers: string[],
  ): Promise<StepSetup> {
    const { agent, deps, session } = this.ctx;
    const contextSize =
      (await lease.launch.contextSize(deps.signal)) ??
      (typeof deps.config.model.context === "number" ? deps.config.model.context : FALLBACK_CONTEXT);
    const maxTokens = agent.max_tokens ?? deps.config.model.max_tokens ?? undefined;
    const key = { userId: this.ctx.params.user_id, sessionId: this.ctx.sessionId };
    // Its server dead before the first request (93f): restarted, heard as at acquire.
    this.reused = await turnSlot(deps.reuse, lease, key, deps.signal, warmup(deps));
    session.images.learn([...refsOf(session.history), ...refsOf(session.state.turn)]);
    // What was erased while the turn waited is neither sent nor cited.
    const kept = stillStored(this.ctx, hits);
    if (kept.length < hits.length) this.ctx.sources = kept.map((h) => h.cite);
    this.layout = new PromptLayout(this.reused?.record ?? emptyRecord(), kept, session.history.length, {
      costOf: (m) => session.images.costOf(m),
      vision,
    });
    // An MCP server's names and descriptions are not the core's words either.
    const tools = breakDeep(toOpenAiTools(this.tools), markerBreaker(markers)) as unknown[];
    dropKnownRefused(lease.launch, tools, this.ctx.warnings);
    return {
      lease,
      system: systemMessage(agent),
      tools,
      markers,
      contextSize,
      maxTokens,
      think: this.ctx.params.think ?? agent.think,
      layout: this.layout,
      slot: this.reused?.slot,
      started: this.reused?.started,
    };
  }

  /** The tools a call may run: those the turn offers, not those llama-server refused (tool-refusals.ts). */
  private offered(setup: StepSetup): AgentTool[] {
    if (setup.tools.length === this.tools.length) return this.tools;
    const names = new Set(setup.tools.map(toolNameOf));
    return this.tools.filter((t) => names.has(t.fn));
  }

  /** What this step sends: the turn's setup, or (the answer of a `response_format` chat) constrained, without tools. */
  private stepSetup(setup: StepSetup): StepSetup {
    if (!this.format || (setup.tools.length > 0 && !this.answering)) return setup;
    return { ...setup, tools: [], format: this.format };
  }

  private async steps(setup: StepSetup): Promise<TurnEnding> {
    const { ctx } = this;
    const { state } = ctx.session;
    this.freeSteps = this.format !== undefined && setup.tools.length > 0;
    for (;;) {
      const calls = pendingCalls(state);
      if (calls?.length) {
        ctx.step = Math.max(0, state.step - 1);
        await runCalls(ctx, this.offered(setup), calls, state.step - 1);
      }
      // The answer to the schema asks again for one given on an allowed step: not the limit's.
      if (state.step >= this.maxSteps && !this.answering) {
        if (!this.freeSteps)
          return { kind: "max_steps", step: Math.max(0, state.step - 1), limit: this.maxSteps };
        this.answerNow("max_steps", `reached the step limit of ${this.maxSteps} steps`);
      }

      const step = state.step;
      begin(ctx.deps, "llm_start", { step });
      ctx.step = step;
      // After a request, or a resume's pending calls run before the first: either may outlast a delete.
      if ((this.sent || calls) && dropErased(ctx, setup.layout) && setup.slot !== undefined)
        await emptyTurnSlot(setup.lease.launch, setup.slot, ctx.deps.signal);
      const stepSetup = this.stepSetup(setup);
      this.sent = true;
      const answer = await llmStep(ctx, stepSetup, step);
      this.read ||= answer.kind === "reply" || answer.kind === "unparsed";
      if (answer.kind === "reply") ctx.usage.add(answer.reply);
      if (answer.kind === "failed") return { kind: "llm_error", step, failure: answer.failure };
      if (answer.kind === "overflow") return this.overflowed(step, answer.error, stepSetup);
      if (answer.kind === "refused") return { kind: "refused", step, error: answer.error };
      ctx.deps.emit("llm_done", { step });
      const ending =
        answer.kind === "unparsed"
          ? await this.unparsed(step, answer.content)
          : stepSetup.format
            ? await this.structured(step, answer.reply, stepSetup)
            : await this.judge(step, answer.reply, stepSetup);
      if (ending) return ending;
    }
  }

  /** What a finished step asked for: an ending, or (undefined) another step. */
  private async judge(
    step: number,
    reply: CompletionResult,
    setup: StepSetup,
  ): Promise<TurnEnding | undefined> {
    const { ctx } = this;
    const { maxTokens, contextSize } = setup;
    const { state } = ctx.session;
    const named = ctx.agent.tools.length > 0;
    logStep(ctx, step, reply);
    const outcome = interpretStep(reply.content, reply.toolCalls, this.known, step, named);
    state.step = step + 1;
    if (outcome.text.trim() !== "") state.best_text = outcome.text;
    const { reasoning } = reply;
    if (reply.finishReason === "length" && !reachedReplyCap(reply, maxTokens)) {
      // The slot is full: no room for a tool result or a re-prompt (and a call cut off here is
      // half written), so the turn ends with its text so far rather than an error.
      const final = outcome.kind === "final";
      const response = final ? reply.content : state.best_text;
      return { kind: "context_full", step, response, contextSize, reasoning: final ? reasoning : "" };
    }
    if (outcome.kind === "final") {
      if (this.format) {
        // Answered freely after tools: now the answer to the schema (the free text goes).
        this.answering = true;
        return undefined;
      }
      // Only our own cap gets here as a length stop; the slot filling up was handled above.
      const cappedAt = reply.finishReason === "length" ? maxTokens : undefined;
      return { kind: "answered", step, response: reply.content, cappedAt, reasoning };
    }
    if (outcome.kind === "calls") {
      state.turn.push({
        role: "assistant",
        content: outcome.text || null,
        tool_calls: outcome.toolCalls,
        // Sent back within the turn: a model that thinks between tool calls builds on it.
        ...(reasoning !== "" ? { reasoning_content: reasoning } : {}),
      });
      await ctx.session.save();
      return undefined;
    }
    // A malformed call goes back to the model saying what was wrong.
    const problems = outcome.problems.join("; ");
    return this.writeAgain(
      step,
      "malformed tool call",
      repromptMessages(outcome, reply.content, problems),
      problems,
    );
  }

  /**
   * llama-server could not read the finished reply (quirks/90d: the model slipped, often in a
   * tool call's syntax): the model is asked again, counted with malformed tool calls.
   */
  private unparsed(step: number, content: string): Promise<TurnEnding | undefined> {
    this.ctx.session.state.step = step + 1;
    return this.writeAgain(step, "unparsed reply", unreadableMessages(content), UNREADABLE);
  }

  /** A reply the model must write again: counted against app.max_parse_errors, told why. */
  private async writeAgain(
    step: number,
    what: string,
    messages: ChatMessage[],
    problems: string,
  ): Promise<TurnEnding | undefined> {
    const { ctx } = this;
    const { state } = ctx.session;
    state.parse_errors++;
    // The problems quote the model's text (a parser's "Unexpected identifier", a tool name): debug only.
    logger.info(`trace=${ctx.traceId} step=${step} ${what} (${state.parse_errors})`);
    logger.debug(`trace=${ctx.traceId} step=${step} ${what}: ${problems}`);
    state.turn.push(...messages);
    const limit = ctx.deps.config.app.max_parse_errors;
    if (state.parse_errors > limit && (!this.freeSteps || this.answering))
      return { kind: "max_parse_errors", step, count: state.parse_errors, limit, problems };
    if (state.parse_errors > limit)
      this.answerNow(
        "max_parse_errors",
        `${state.parse_errors} malformed tool calls (limit ${limit} re-prompts)`,
      );
    await ctx.session.save();
    return undefined;
  }

  /**
   * A `response_format` chat at a limit of its tool calls: its answer is asked for under the
   * schema now, without tools (a result carries `json`; stopping here left a turn no resume could
   * finish), and the result's warning says which limit ended the tool calls.
   */
  private answerNow(code: "max_steps" | "max_parse_errors", what: string): void {
    this.answering = true;
    this.ctx.warnings.push({
      code,
      message: `${what}: the tools stopped there and the answer was asked for`,
    });
  }

  /** A constrained step's answer: the value when it matches the schema, else `output_invalid` (fails closed). */
  private async structured(step: number, reply: CompletionResult, setup: StepSetup): Promise<TurnEnding> {
    const { ctx } = this;
    logStep(ctx, step, reply);
    ctx.session.state.step = step + 1;
    const { content: text, reasoning, finishReason } = reply;
    let checked: AnswerCheck;
    try {
      checked = await (setup.format as AnswerFormat).check(text, ctx.deps.signal);
    } catch (err) {
      if (isFormatRefused(err)) return { kind: "refused", step, error: err };
      throw err;
    }
    // A length stop short of our cap is the slot's context filling; valid, the answer still counts.
    const cappedAt =
      finishReason === "length" && reachedReplyCap(reply, setup.maxTokens) ? setup.maxTokens : undefined;
    const cut = { step, text, finishReason, reasoning, cappedAt, context: setup.contextSize };
    if (!checked.ok) return { kind: "output_invalid", errors: checked.errors, total: checked.total, ...cut };
    return { kind: "answered", step, response: text, cappedAt, reasoning, json: { value: checked.value } };
  }

  /**
   * The prompt overflowed even without history. Before the turn has done anything it is the
   * user's input that does not fit: refused. Later it is the turn's own tool results or
   * re-prompts: the turn ends like a full reply.
   */
  private overflowed(step: number, err: LlmError, setup: StepSetup): TurnEnding {
    const { n_prompt_tokens, n_ctx } = err.data;
    const promptTokens = typeof n_prompt_tokens === "number" ? n_prompt_tokens : undefined;
    const slot = typeof n_ctx === "number" ? n_ctx : setup.contextSize;
    if (this.ctx.session.state.turn.length <= 1) {
      // An input of a word refused for the tools' definitions must say so, not "shorten the input".
      const tools = overflowingTools(setup, this.ctx.session.state.turn, this.tools, promptTokens, slot);
      return { kind: "context_overflow", step, promptTokens, slot, tools };
    }
    this.ctx.deps.emit("llm_done", { step });
    return { kind: "context_outgrown", step, promptTokens, slot };
  }
}

/**
 * A finished step in the log: how it ended, its counts, llama-server's timings, and `at`: when
 * the request was written and its first token read, in ms since the epoch (sub-ms, comparable
 * across processes), so a host can tell the core's own time on the first token from
 * llama-server's (docs/performance.md, "The core's own path").
 */
function logStep(ctx: TurnContext, step: number, reply: CompletionResult): void {
  logger.info(
    `trace=${ctx.traceId} step=${step} finish=${reply.finishReason} reasoning_tokens=${reply.reasoningTokens} usage=${JSON.stringify(reply.usage ?? {})} timings=${JSON.stringify(reply.timings ?? {})} at=${JSON.stringify(wireTimes(reply))}`,
  );
}

const epochMs = (t: number | undefined) =>
  t === undefined ? undefined : Math.round((performance.timeOrigin + t) * 1000) / 1000;

function wireTimes(reply: CompletionResult): { request_written?: number; first_token?: number } {
  return { request_written: epochMs(reply.writtenAt), first_token: epochMs(reply.firstTokenAt) };
}

/** Whether a length stop was our own reply cap rather than the slot's context filling up. */
function reachedReplyCap(reply: CompletionResult, maxTokens: number | undefined): boolean {
  if (maxTokens === undefined) return false;
  // Without usage the cap is the likelier cause: it is the limit we know was set.
  const completion = Number(reply.usage?.completion_tokens ?? Number.NaN);
  return !(completion < maxTokens);
}
