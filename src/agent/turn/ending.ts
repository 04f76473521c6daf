import { LlmError } from "../../llama/errors.ts";
import type { ChatResult, LoopAbortReason, WarningCode } from "../../protocol/chat.ts";
import { CoreError } from "../../protocol/errors.ts";
import type { Source } from "../../protocol/sources.ts";
import type { TurnMessage } from "../../store/conversations.ts";
import { resetMessage } from "../../store/db/reset-note.ts";
import { logger } from "../../util/logger.ts";
import { cutText } from "../../util/text-cut.ts";
import { type AnswerError, SHOWN_ANSWER_ERRORS } from "../json-validator.ts";
import type { TurnContext } from "./context.ts";
import { refsOf } from "./images.ts";
import type { LlmFailure } from "./llm-step.ts";
import { memoryText } from "./memory.ts";
import { heaviest, type ToolsCost } from "./tools-cost.ts";

/** What a turn returns: the chat's result less what the method adds, which the turn does not know: the events dropped, the model it chose. */
export type TurnResult = Omit<ChatResult, "dropped_events" | "model">;

/**
 * Every way a turn ends, each resolved by `endTurn`. The first three answer (`final`) and are
 * committed; the two limits (`loop_abort`) are committed with the best text as the answer; the
 * rest are errors that leave the session resumable (`context_overflow`: as it was).
 */
export type TurnEnding =
  /**
   * The model answered: its text, possibly empty or cut at our own reply cap (`cappedAt`), and
   * what it thought first; with `response_format`, the answer's value (`json`), valid.
   */
  | {
      kind: "answered";
      step: number;
      response: string;
      cappedAt: number | undefined;
      reasoning: string;
      json?: { value: unknown };
    }
  /** The reply filled the slot's context and was cut off there. */
  | { kind: "context_full"; step: number; response: string; contextSize: number; reasoning: string }
  /**
   * With `response_format`: the answer is not JSON matching the schema (fails closed,
   * docs/agent.md#thinking-and-structured-output).
   */
  | {
      kind: "output_invalid";
      step: number;
      text: string;
      errors: AnswerError[];
      /** How many errors there are, when `errors` is only the first of them (the validator's thread). */
      total?: number;
      finishReason: string | null;
      reasoning: string;
      /** A length stop at our reply cap (its tokens), else (`context`) the slot's context filling. */
      cappedAt?: number | undefined;
      context?: number;
    }
  /**
   * The request cannot be used: the chat's `response_format`, or its images (a model that reads
   * none: `model_not_vision`, docs/protocol.md#images); refused, like a bad param.
   */
  | { kind: "refused"; step: number; error: CoreError }
  /** Later in the turn, its own messages no longer fit the slot even without history. */
  | { kind: "context_outgrown"; step: number; promptTokens: number | undefined; slot: number }
  | { kind: "max_steps"; step: number; limit: number }
  | { kind: "max_parse_errors"; step: number; count: number; limit: number; problems: string }
  /**
   * The user's input alone does not fit the slot: refused, the session left as it was. `tools`:
   * the agent's tool definitions are why (the rest fits without them).
   */
  | {
      kind: "context_overflow";
      step: number;
      promptTokens: number | undefined;
      slot: number;
      tools?: ToolsCost;
    }
  | { kind: "llm_error"; step: number; failure: LlmFailure }
  /** The chat's signal aborted: at the step being worked on, or a cancel that won the finish. */
  | { kind: "cancelled" }
  /** The turn could not go on (no model, a folder it cannot write): no terminal event. */
  | { kind: "failed"; error: unknown };

/** The event that ends a turn's stream. */
type Terminal =
  | { event: "final"; step: number; response: string }
  | { event: "loop_abort"; step: number; reason: LoopAbortReason };

/** An ending resolved: its terminal event, then the turn committed, or the session kept and the error thrown. */
type Closing =
  | { terminal: Terminal; session: "commit"; response: string; reasoning: string; json?: { value: unknown } }
  | { terminal: Terminal | undefined; session: "keep" | "put_back"; error: unknown };

/**
 * The one place a turn ends: emits its terminal event (`final` or `loop_abort`; none when it
 * failed), then commits the turn and returns the result, or leaves the session for `resume`
 * (a refused turn: as it was) and throws the chat's error.
 */
export async function endTurn(ctx: TurnContext, ending: TurnEnding): Promise<TurnResult> {
  const closing = close(ctx, ending);
  // A turn that will commit settles before its terminal event: once `final` is out the result
  // follows, and a cancel arriving after it finds the chat finished (docs/protocol.md, cancel).
  if (closing.session === "commit" && !ctx.deps.settle()) return endTurn(ctx, { kind: "cancelled" });
  const { terminal } = closing;
  if (terminal?.event === "final")
    ctx.deps.emit("final", { step: terminal.step, response: terminal.response });
  else if (terminal) ctx.deps.emit("loop_abort", { step: terminal.step, reason: terminal.reason });
  if (closing.session === "commit") return commit(ctx, closing);
  // "keep": the checkpoint, written after each step, is already what `resume` needs.
  if (closing.session === "put_back") await ctx.session.putBack();
  throw closing.error;
}

/** What an ending means: its terminal event, its warnings, and what becomes of the turn. */
function close(ctx: TurnContext, ending: TurnEnding): Closing {
  const closing = closeAs(ctx, ending);
  // A `response_format` chat's result carries `json`: a limit or a full context that ended the
  // turn before an answer under the schema fails closed rather than answering free text.
  if (closing.session !== "commit" || closing.json || !ctx.params.response_format) return closing;
  const step = closing.terminal.step;
  const why =
    ending.kind === "max_steps" || ending.kind === "max_parse_errors"
      ? `the turn stopped at ${ending.kind === "max_steps" ? "its step limit" : "its limit of malformed tool calls"} before the model answered under the schema`
      : "the model's context filled before it answered under the schema";
  return {
    terminal: { event: "loop_abort", step, reason: "output_invalid" },
    session: "keep",
    error: outputInvalid(ctx, {
      kind: "output_invalid",
      step,
      text: closing.response,
      errors: [{ path: "", message: why }],
      finishReason: null,
      reasoning: closing.reasoning,
    }),
  };
}

function closeAs(ctx: TurnContext, ending: TurnEnding): Closing {
  const warn = (code: WarningCode, message: string) => ctx.warnings.push({ code, message });
  switch (ending.kind) {
    case "answered":
      answerWarnings(ctx, ending);
      return answered(ending.step, ending.response, ending.reasoning, ending.json);
    case "context_full":
      contextFull(
        ctx,
        ending.step,
        `the reply filled the model's context (${ending.contextSize} tokens per slot) and was cut off there; raise model.context or lower llama.parallel to give each slot more, or set model.max_tokens to keep replies shorter`,
      );
      if (ending.response.trim() === "" && ending.reasoning.trim() !== "")
        warn("reasoning_only", reasoningOnly(ctx, { context: ending.contextSize }));
      return answered(ending.step, ending.response, ending.reasoning);
    case "output_invalid":
      return {
        terminal: { event: "loop_abort", step: ending.step, reason: "output_invalid" },
        session: "keep",
        error: outputInvalid(ctx, ending),
      };
    case "refused":
      return {
        terminal: { event: "loop_abort", step: ending.step, reason: "llm_error" },
        // Refused before the turn did anything: as it was; later (tools ran), resumable.
        session: ctx.session.state.turn.length <= 1 ? "put_back" : "keep",
        error: ending.error,
      };
    case "context_outgrown":
      contextFull(
        ctx,
        ending.step,
        `this turn's messages (${tokens(ending.promptTokens)}, its tool results included) no longer fit the model's context (${ending.slot} tokens per slot), so it ends with the text so far; raise model.context or lower llama.parallel to give each slot more`,
      );
      return answered(ending.step, ctx.session.state.best_text, "");
    case "max_steps":
      warn("max_steps", `stopped after reaching the step limit of ${ending.limit} steps`);
      return stopped(ctx, ending.step, "max_steps");
    case "max_parse_errors":
      warn(
        "max_parse_errors",
        `stopped after ${ending.count} malformed tool calls (limit ${ending.limit} re-prompts): ${ending.problems}`,
      );
      return stopped(ctx, ending.step, "max_parse_errors");
    case "context_overflow":
      return {
        terminal: { event: "loop_abort", step: ending.step, reason: "context_overflow" },
        session: "put_back",
        error: new CoreError(
          "invalid_request",
          `the prompt does not fit the model's context even without the session's history: ${tokens(ending.promptTokens)}, a slot holds ${ending.slot}; ${overflowAdvice(ctx, ending.tools)}`,
          {
            reason: "context_overflow",
            n_prompt_tokens: ending.promptTokens ?? null,
            n_ctx: ending.slot,
            trace_id: ctx.traceId,
          },
        ),
      };
    case "llm_error":
      return {
        terminal: { event: "loop_abort", step: ending.step, reason: "llm_error" },
        session: "keep",
        error: llmError(ending.failure, ctx.traceId),
      };
    case "cancelled":
      return {
        terminal: { event: "loop_abort", step: ctx.step, reason: "cancelled" },
        session: "keep",
        error: ctx.deps.signal.reason,
      };
    case "failed":
      return { terminal: undefined, session: "keep", error: ending.error };
  }
}

/** An answer's warnings: thinking and no answer, no text at all, or cut at our own cap. */
function answerWarnings(ctx: TurnContext, ending: TurnEnding & { kind: "answered" }): void {
  const { response, reasoning, cappedAt } = ending;
  const warn = (code: WarningCode, message: string) => ctx.warnings.push({ code, message });
  // Defined, not retried: a model that says nothing once usually says nothing again.
  if (response.trim() === "" && reasoning.trim() !== "")
    warn("reasoning_only", reasoningOnly(ctx, cappedAt === undefined ? "stopped" : { cap: cappedAt }));
  else if (response.trim() === "")
    warn("empty_reply", "the model ended its turn without any text or tool call; the response is empty");
  if (cappedAt !== undefined)
    warn("reply_truncated", `the reply was cut off at the reply limit of ${cappedAt} tokens`);
}

function answered(step: number, response: string, reasoning: string, json?: { value: unknown }): Closing {
  return {
    terminal: { event: "final", step, response },
    session: "commit",
    response,
    reasoning,
    ...(json ? { json } : {}),
  };
}

/** A limit stopped the turn: the best text stands in as the answer, so the history stays a valid conversation. */
function stopped(ctx: TurnContext, step: number, reason: "max_steps" | "max_parse_errors"): Closing {
  return {
    terminal: { event: "loop_abort", step, reason },
    session: "commit",
    response: ctx.session.state.best_text,
    reasoning: "",
  };
}

/** The slot's context is full: the turn ends with the text so far, committed like any answer. */
function contextFull(ctx: TurnContext, step: number, message: string): void {
  logger.info(`trace=${ctx.traceId} step=${step} context full: ${message}`);
  ctx.warnings.push({ code: "context_full", message });
}

/** The turn's answer goes into the history and memory, its checkpoint goes, the result is built. */
async function commit(ctx: TurnContext, closing: Closing & { session: "commit" }): Promise<TurnResult> {
  const { response, reasoning, json } = closing;
  const usage = ctx.usage.total();
  // The turn's cost and sources are stored with its answer (sessions.get shows them).
  const answer: TurnMessage = {
    role: "assistant",
    content: response,
    ...(reasoning !== "" ? { reasoning_content: reasoning } : {}),
    usage,
    ...(ctx.sources.length > 0 ? { sources: ctx.sources } : {}),
  };
  ctx.session.state.turn.push(answer);
  await ctx.session.commit(memoryText(ctx, response));
  // A resume's params name no edit: the checkpoint says whether the turn was one. A turn that
  // set aside an interrupted one replaced that turn's words and images in the slot as an edit
  // does; the checkpoint says that too, for the resume that finishes it.
  const { replace_from_seq, set_aside } = ctx.session.state;
  if (replace_from_seq !== undefined || set_aside) ctx.deps.edited?.(replace_from_seq !== undefined);
  // The database's reset told here, first: an error carries no warnings, so a chat refused or
  // failed (a resume with nothing to resume after a crash, a 5xx) leaves it (docs/agent.md, The store).
  const resets = ctx.deps.store().takeResets();
  ctx.warnings.unshift(...resets.map((r) => ({ code: "store_reset" as const, message: resetMessage(r) })));
  return {
    response,
    reasoning,
    ...(json ? { json: json.value } : {}),
    session_id: ctx.sessionId,
    trace_id: ctx.traceId,
    warnings: ctx.warnings,
    usage,
    sources: namedNow(ctx),
  };
}

/**
 * The turn's sources named as they are as its result goes out: a cited document or session
 * erased since its recall (a delete answered meanwhile) is sent with `""`, never its old name.
 */
function namedNow(ctx: TurnContext): Source[] {
  if (ctx.sources.length === 0) return [];
  try {
    return ctx.deps.store().memory.named(ctx.params.user_id, ctx.sources);
  } catch {
    // The store unreadable now: no name is vouched for.
    return ctx.sources.map((s) => ({ ...s, name: "" }));
  }
}

/** What ended a reply that was only thinking. */
type ThinkingLimit = "stopped" | { cap: number } | { context: number };

/** The `reasoning_only` warning: which limit ended the thinking, and what to change. */
function reasoningOnly(
  ctx: TurnContext,
  limit: ThinkingLimit,
  kept = " (its thinking is in `reasoning`)",
): string {
  const think = ctx.params.think ?? ctx.agent.think;
  const budget =
    typeof think === "object"
      ? `lower the thinking budget (think.budget_tokens ${think.budget_tokens})`
      : "bound the thinking with think: {budget_tokens: N}";
  // Already off, and the model thought all the same (a template that ignores enable_thinking:
  // DeepSeek-R1's, gpt-oss's): advising think: false again leaves the host nothing to try.
  const ignored = think === false;
  const off = ignored ? "" : ", or turn thinking off with think: false";
  const why = ignored ? " (think: false did not stop this model's thinking: its template ignores it)" : "";
  if (limit === "stopped")
    return `the model ended its turn after thinking, without an answer${kept}; ask again${off}${why}`;
  if ("cap" in limit)
    return `the model spent the whole reply limit of ${limit.cap} tokens thinking and gave no answer${kept}; raise max_tokens (the agent's or model.max_tokens)${ignored ? " or" : ","} ${budget} below it${off}${why}`;
  return `the model thought until the slot's context (${limit.context} tokens) was full and gave no answer${kept}; ${budget}${ignored ? "" : ", turn thinking off with think: false,"} or raise model.context${why}`;
}

/** The structured answer does not hold: `output_invalid`, with what the model wrote and why it fails. */
function outputInvalid(ctx: TurnContext, ending: TurnEnding & { kind: "output_invalid" }): CoreError {
  const { text, errors, finishReason } = ending;
  const cut =
    finishReason === "length"
      ? `; ${lengthAdvice(ctx, ending)}`
      : thoughtOnly(ending)
        ? `; ${reasoningOnly(ctx, "stopped", "")}`
        : "";
  const first = errors[0];
  // Its path cut as in `data.errors`: uncut, one key as long as the answer made the message as long.
  const why = first ? `${cutPath(first.path) || "the answer"}: ${first.message}` : "it does not match";
  // A path can be a key the model wrote: debug only, as for malformed tool calls.
  logger.info(`trace=${ctx.traceId} step=${ending.step} output invalid (${errors.length} errors)`);
  logger.debug(`trace=${ctx.traceId} step=${ending.step} output invalid: ${why}`);
  return new CoreError("output_invalid", `the answer does not match response_format: ${why}${cut}`, {
    text,
    // An answer of thousands of failing items is as many errors: the first few say what is wrong.
    errors: errors.slice(0, SHOWN_ANSWER_ERRORS).map((e) => ({ ...e, path: cutPath(e.path) })),
    errors_total: ending.total ?? errors.length,
    finish_reason: finishReason,
    trace_id: ctx.traceId,
  });
}

/**
 * Which limit cut the answer and what to change: a reply that was all thinking says so (the
 * result's `reasoning_only` advice: there is no result), and the context filling up is not
 * blamed on max_tokens.
 */
function lengthAdvice(ctx: TurnContext, ending: TurnEnding & { kind: "output_invalid" }): string {
  const { cappedAt, context } = ending;
  if (cappedAt === undefined && context !== undefined) {
    if (thoughtOnly(ending)) return reasoningOnly(ctx, { context }, "");
    return `the answer was cut off by a limit: the model's context (${context} tokens per slot) was full (raise model.context or lower llama.parallel)`;
  }
  if (cappedAt !== undefined && thoughtOnly(ending)) return reasoningOnly(ctx, { cap: cappedAt }, "");
  return "the answer was cut off by a limit (raise max_tokens)";
}

/** A constrained step's reply that was all thinking (`context`: the step's own ending, not a limit's). */
function thoughtOnly(ending: TurnEnding & { kind: "output_invalid" }): boolean {
  return ending.context !== undefined && ending.text.trim() === "" && ending.reasoning.trim() !== "";
}

/** A path is the model's keys: one may be as long as the answer. */
function cutPath(path: string): string {
  return cutText(path, 200).toWellFormed();
}

/** What to do about a prompt that does not fit: the tools when they are why, else the input. */
function overflowAdvice(ctx: TurnContext, tools: ToolsCost | undefined): string {
  const images = refsOf(ctx.session.state.turn).length;
  if (!tools && images > 0)
    return `${images === 1 ? "its image takes" : `its ${images} images take`} part of it (a long, thin image can take many times llama-server's --image-max-tokens: docs/plan.md); send fewer, smaller or squarer images, shorten the input, or raise model.context or lower llama.parallel`;
  if (!tools) return "shorten the input, or raise model.context or lower llama.parallel";
  return `the definitions of the ${tools.count} tools of agent '${ctx.agent.name}' take about ${tools.tokens} of them (by server: ${heaviest(tools)}); give the agent fewer tools (its tools: patterns, say 'server.tool' in place of 'server.*'), or raise model.context or lower llama.parallel`;
}

function tokens(promptTokens: number | undefined): string {
  return promptTokens !== undefined ? `${promptTokens} tokens` : "too many tokens";
}

/** The chat's error for a failed request: the server's death or wedge, else what llama-server did. */
function llmError(failure: LlmFailure, traceId: string): CoreError {
  if (failure instanceof LlmError) {
    return new CoreError("internal_error", failure.message, {
      reason: failure.kind,
      trace_id: traceId,
      ...failure.data,
    });
  }
  return new CoreError(failure.code, failure.message, { reason: "server_failed", trace_id: traceId });
}
