import { CHARS_PER_TOKEN } from "../../llama/completion.ts";
import { isUnparsedReply, LlmError } from "../../llama/errors.ts";
import { templatedPromptTokens } from "../../llama/prompt-tokens.ts";
import type { CompletionResult } from "../../llama/stream-reply.ts";
import type { ChatMessage } from "../../protocol/chat-message.ts";
import { type CoreError, isCoreError } from "../../protocol/errors.ts";
import type { Think } from "../../protocol/think.ts";
import type { LlamaLease } from "../../runtime/endpoint.ts";
import { withoutQuotes } from "../../runtime/log-redact.ts";
import { logger } from "../../util/logger.ts";
import { estimateAll, estimateTokens } from "../context-budget.ts";
import { watchedCompletion } from "../watched-completion.ts";
import { type AnswerFormat, formatRefused, isFormatRefused } from "./answer-format.ts";
import type { TurnContext } from "./context.ts";
import { imageRefusal, refsOf, textOnly } from "./images.ts";
import { breakMarkers } from "./marker-break.ts";
import type { PromptLayout } from "./prompt-layout.ts";
import { thinkFields } from "./think.ts";
import { dropRefusedTools, schemaRefused } from "./tool-refusals.ts";

const OVERFLOW_RETRIES = 2;

/** What every step of a turn sends besides the conversation. */
export interface StepSetup {
  lease: LlamaLease;
  system: ChatMessage;
  /** The `tools` array of the request. */
  tools: unknown[];
  /** Tokens per slot. */
  contextSize: number;
  /** The reply cap, when one is configured. */
  maxTokens: number | undefined;
  /** The chat's `think`, else the agent's (docs/agent.md#thinking-and-structured-output). */
  think: Think | undefined;
  /** This step's answer is constrained to the chat's `response_format` (no tools then). */
  format?: AnswerFormat;
  /**
   * The history from the session's cut with its notes, and the turn's own notes
   * (docs/agent.md#prompt-reuse).
   */
  layout: PromptLayout;
  /** The slot the session keeps (`id_slot`, agent/kv/); undefined: llama-server picks one. */
  slot: number | undefined;
  /** llama-server took up a request of the step (answered 2xx): the slot no longer holds what it did. */
  started?: () => void;
  /** The model's markers, broken wherever text not the core's spells them (marker-break.ts). */
  markers?: readonly string[];
}

/** llama-server failed the request: died or wedged (a CoreError from the watchdog), or an LlmError. */
export type LlmFailure = CoreError | LlmError;

/** What one LLM step came to, for the turn to judge. */
export type StepAnswer =
  | { kind: "reply"; reply: CompletionResult }
  /** Even the prompt without history does not fit: llama-server's 400. */
  | { kind: "overflow"; error: LlmError }
  /** The step's `response_format` cannot be used (our validator or llama-server's 400, 95d). */
  | { kind: "refused"; error: CoreError }
  | { kind: "failed"; failure: LlmFailure }
  /** llama-server could not parse the finished reply (errors.ts `isUnparsedReply`): what it streamed. */
  | { kind: "unparsed"; content: string };

/**
 * One LLM call with as much history as fits. An overflow is retried with less history
 * (halved, then none); what even the prompt without history cannot fit, or a failed request,
 * is returned for the turn to judge. A cancel throws the chat's abort reason.
 */
export async function llmStep(ctx: TurnContext, setup: StepSetup, step: number): Promise<StepAnswer> {
  const { deps, session } = ctx;
  const { system, tools, contextSize, layout } = setup;
  const reserve = stepReserve(setup);
  const turn = layout.turnMessages(session.state.turn);
  const room =
    contextSize - reserve - estimateTokens(system) - estimateAll(tools) - layout.turnImageCost(turn);
  // The turn's own answered results go before a whole turn of the history would (turnRoom).
  let own = layout.fitTurn(turn, layout.turnRoom(session.history, turn, room));
  let budget = room - estimateAll(own);
  for (let attempt = 0; ; attempt++) {
    const kept = layout.history(session.history, Math.max(0, budget));
    const dropped = session.history.length - kept.length;
    if (dropped > 0)
      logger.debug(`trace=${ctx.traceId} step=${step} history trimmed: ${dropped} older messages left out`);
    const partial = { step, reasoning: "", content: "" };
    const messages = breakMarkers([system, ...kept, ...own], setup.markers ?? []);
    const refs = refsOf(messages);
    let textTokens: Promise<number | undefined> | undefined;
    // Not one of the request's failures: an image another core's delete erased ends it as that
    // delete; one whose stored row is damaged is refused as an undecodable one is (images.ts).
    const unloadable = await session.images.load(refs);
    if (unloadable) return { kind: "refused", error: unloadable };
    try {
      const body = { ...request(ctx, setup), messages: session.images.wire(messages) };
      const reply = await watchedCompletion(setup.lease, body, {
        signal: deps.signal,
        gatherMs: deps.config.app.stream_gather_ms,
        maxChars: contextSize * CHARS_PER_TOKEN,
        spare: deps.spare,
        // Pieces handed on after a cancel was answered are kept in the checkpoint's partial
        // reply, not sent: the host's cancel ends the stream it shows.
        onDelta: (delta) => {
          partial.content += delta;
          if (!deps.signal.aborted) deps.emit("llm_chunk", { step, delta });
        },
        ...(setup.started ? { onStarted: setup.started } : {}),
        onSent: () => {
          // While llama-server reads the prompt: what the same prompt is without its images.
          if (refs.length > 0) textTokens = promptWithoutImages(ctx, setup, messages);
        },
        onReasoning: (delta) => {
          partial.reasoning += delta;
          if (!deps.signal.aborted) deps.emit("llm_reasoning", { step, delta });
        },
      });
      delete session.state.partial;
      if (textTokens) countImages(ctx, refs, reply, await textTokens, contextSize);
      return { kind: "reply", reply };
    } catch (err) {
      await keepPartial(ctx, partial);
      if (deps.signal.aborted) throw deps.signal.reason;
      if (isFormatRefused(err)) return { kind: "refused", error: err };
      if (setup.format && schemaRefused(err)) return { kind: "refused", error: formatRefused(err.message) };
      // A tool whose schema llama-server cannot convert fails every request that offers it (95e):
      // found, left out with a warning, and the step sent again without it.
      if (schemaRefused(err) && (await withoutRefusedTools(ctx, setup, err.message))) {
        attempt--; // not one of the overflow's retries
        continue;
      }
      // The server died or wedged mid-request (the supervisor restarts it on the next chat).
      if (isCoreError(err)) return { kind: "failed", failure: err };
      if (!(err instanceof LlmError)) throw err;
      const image = imageRefusal(err, ctx.params.images?.length ?? 0, refs);
      if (image) return { kind: "refused", error: image };
      if (isUnparsedReply(err)) return { kind: "unparsed", content: partial.content };
      if (err.kind !== "context_overflow") return { kind: "failed", failure: err };
      // The turn's own answered results go before the history does, whose cut never comes back
      // (docs/agent.md#history-trimming); none left to leave out, the history, then the turn ends.
      const less = layout.fitTurn(turn);
      if (estimateAll(less) < estimateAll(own)) {
        own = less;
        attempt--; // not one of the history's retries
        continue;
      }
      if (layout.kept === 0) return { kind: "overflow", error: err };
      budget = attempt < OVERFLOW_RETRIES ? Math.floor(layout.keptCost / 2) : 0;
    }
  }
}

/**
 * The tokens kept free for the reply: max_tokens (it bounds the whole reply, thinking included),
 * else min(1024, a quarter of the slot) plus `think`'s budget_tokens, and never over half the
 * slot. A thinking budget left out of it let the history fill the slot up to the answer's 1024,
 * and the thinking the rest: the reply ended with no answer. A max_tokens the slot cannot give (at or past its size, as a config
 * for a larger context leaves it) left no budget for any history: every turn went out without
 * the conversation before it. A reply that outgrows the rest ends as `context_full`.
 */
export function replyReserve(maxTokens: number | undefined, contextSize: number, think?: Think): number {
  const half = Math.floor(contextSize / 2);
  const thinking = typeof think === "object" ? think.budget_tokens : 0;
  return Math.min(maxTokens ?? Math.min(1024, Math.floor(contextSize / 4)) + thinking, half);
}

/**
 * The step's reply reserve. A template that does not think (as /props said) spends no thinking
 * budget: kept free all the same (an agent's default `think`, any model), it cost the history
 * up to half the slot.
 */
function stepReserve(setup: StepSetup): number {
  const thinks = setup.lease.launch.thinking !== false;
  return replyReserve(setup.maxTokens, setup.contextSize, thinks ? setup.think : undefined);
}

/**
 * What a step that failed mid-stream had said, kept in the checkpoint (a thinking model may
 * have reasoned for minutes before the server died); the next successful step drops it.
 */
async function keepPartial(
  ctx: TurnContext,
  partial: { step: number; reasoning: string; content: string },
): Promise<void> {
  if (partial.reasoning === "" && partial.content === "") return;
  ctx.session.state.partial = partial;
  try {
    await ctx.session.save();
  } catch (err) {
    logger.warn(
      `trace=${ctx.traceId} step=${partial.step} the partial reply was not kept: ${(err as Error).message}`,
    );
  }
}

/** The step's tools without those llama-server refuses (tool-refusals.ts); false when none was. */
async function withoutRefusedTools(ctx: TurnContext, setup: StepSetup, why: string): Promise<boolean> {
  if (setup.tools.length === 0) return false;
  const { lease } = setup;
  const extra: Record<string, unknown> = { ...thinkFields(setup.think) };
  try {
    return (
      (await dropRefusedTools(lease, lease.launch, setup.tools, extra, ctx.warnings, ctx.deps.signal, {
        why,
        ...(setup.slot === undefined ? {} : { slot: setup.slot }),
      })) > 0
    );
  } catch (err) {
    if (ctx.deps.signal.aborted) throw ctx.deps.signal.reason;
    logger.warn(
      `trace=${ctx.traceId} the tools llama-server refuses could not be found: ${(err as Error).message}`,
    );
    return false;
  }
}

/**
 * The prompt's tokens without its images (llama/prompt-tokens.ts), asked while llama-server
 * reads the prompt; undefined when it cannot be known (logged: usage then leaves the images out).
 */
function promptWithoutImages(
  ctx: TurnContext,
  setup: StepSetup,
  messages: ChatMessage[],
): Promise<number | undefined> {
  const body = { ...request(ctx, setup), messages: textOnly(messages) };
  return templatedPromptTokens(setup.lease, body, ctx.deps.signal).catch((err) => {
    // Its 500 can quote the request, the whole conversation (docs/protocol.md: logs never do).
    const why = withoutQuotes((err as Error).message);
    logger.info(`trace=${ctx.traceId} the prompt's image tokens are not known: ${why}`);
    return undefined;
  });
}

/**
 * What the step's images added to its prompt (docs/protocol.md#images): its prompt tokens less
 * the same prompt without them, into the turn's usage and, shared out, each image's count. A
 * count no prompt that ran can have (not a whole number, or past the slot's context: a broken
 * server's, JSON's 1e999 is Infinity) counts nothing: each image's count is stored with it and
 * costs it in every later turn's budget, and the store's column takes only integers.
 */
function countImages(
  ctx: TurnContext,
  refs: ReturnType<typeof refsOf>,
  reply: CompletionResult,
  textTokens: number | undefined,
  contextSize: number,
): void {
  const given = reply.usage?.prompt_tokens;
  const prompt = Number.isSafeInteger(given) ? (given as number) : Number.NaN;
  if (textTokens === undefined || !(prompt >= textTokens && prompt <= contextSize)) return;
  ctx.usage.addImageTokens(prompt - textTokens);
  ctx.session.images.counts(refs, prompt - textTokens);
}

/** The request body but its messages: the tools, and the agent's sampling settings that are set. */
function request(ctx: TurnContext, setup: StepSetup) {
  const { agent } = ctx;
  return {
    ...(setup.tools.length > 0 ? { tools: setup.tools } : {}),
    ...thinkFields(setup.think),
    ...(setup.format ? { response_format: setup.format.request() } : {}),
    ...(agent.temperature !== undefined ? { temperature: agent.temperature } : {}),
    ...(agent.top_p !== undefined ? { top_p: agent.top_p } : {}),
    ...(setup.maxTokens !== undefined ? { max_tokens: setup.maxTokens } : {}),
    ...(setup.slot !== undefined ? { id_slot: setup.slot } : {}),
  };
}
