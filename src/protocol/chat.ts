import { z } from "zod";
import type { ChatEventName as ChatEventNameListed } from "./capabilities.ts";
import { IMAGES_HARD_MAX, ImageInputSchema } from "./image-input.ts";
import { ModelRefSchema } from "./model-state.ts";
import { ResponseFormatSchema } from "./response-format.ts";
import { SafeIdSchema } from "./safe-id.ts";
import { SourceSchema } from "./sources.ts";
import { ThinkSchema } from "./think.ts";
import { UsageSchema } from "./usage.ts";
import { UserIdSchema, userParams } from "./user-params.ts";
import { WarmupProgressFields } from "./warmup-progress.ts";

/**
 * `chat` (docs/protocol.md#chat, docs/agent.md): its params, its result and its events. The
 * params are strict at the top (user-params.ts: a `userId` typo wrote into the default user's
 * session and recalled the default user's memory into the reply); `response_format`'s JSON
 * Schema stays open.
 */
export const ChatParamsSchema = userParams({
  user_id: UserIdSchema,
  /** Omitted: a new random 8-character id from a-z0-9. */
  session_id: SafeIdSchema.optional(),
  /** Omitted: the first agent in the config. */
  agent: z.string().min(1).optional(),
  input: z.string().default(""),
  /**
   * Images the user message shows the model (docs/protocol.md#images): base64 `data` or a local
   * `path`, checked by the core before anything is sent; stored with the message.
   */
  images: z.array(ImageInputSchema).max(IMAGES_HARD_MAX).optional(),
  /**
   * The model (docs/models.md, "Several models"): a configured name, or a GGUF's path or `hf:`
   * reference; omitted: the agent's `model`, else `default`.
   */
  model: ModelRefSchema.optional(),
  resume: z.boolean().default(false),
  approve_execution: z.boolean().default(false),
  /** Replaces the session's last answer: its last user message runs again (`input` must be empty). */
  regenerate: z.boolean().default(false),
  /** An edit: the user message with this seq becomes `input`, and everything after it goes. */
  replace_from: z.number().int().nonnegative().optional(),
  /**
   * Whether and how much a reasoning model thinks (docs/agent.md#thinking-and-structured-output);
   * omitted: the agent's `think`, else the model's way.
   */
  think: ThinkSchema.optional(),
  /**
   * The answer as JSON, constrained by llama-server and validated by the core
   * (docs/agent.md#thinking-and-structured-output).
   */
  response_format: ResponseFormatSchema.optional(),
});
export type ChatParams = z.infer<typeof ChatParamsSchema>;

/** Every runtime notice a chat result may carry in `warnings` (docs/protocol.md#chat). */
export const WarningCodeSchema = z.enum([
  "nothing_to_resume",
  "checkpoint_discarded",
  "tools_unavailable",
  "empty_reply",
  "reply_truncated",
  "max_steps",
  "max_parse_errors",
  "history_reset",
  "checkpoint_reset",
  "context_full",
  "memory_corrupt",
  "store_reset",
  "reasoning_only",
]);
export type WarningCode = z.infer<typeof WarningCodeSchema>;

export const WarningSchema = z.object({ code: WarningCodeSchema, message: z.string() });
export type Warning = z.infer<typeof WarningSchema>;

/** Why a turn stopped early, as `loop_abort` says. */
export const LoopAbortReasonSchema = z.enum([
  "cancelled",
  "max_steps",
  "max_parse_errors",
  "context_overflow",
  "llm_error",
  "output_invalid",
]);
export type LoopAbortReason = z.infer<typeof LoopAbortReasonSchema>;

export const ChatResultSchema = z.object({
  response: z.string(),
  /**
   * The model it ran on: its configured name (`default` for the model section), or the path or
   * reference as given. Always sent by this core; optional because cores before several models
   * (docs/models.md, "Several models") leave it out.
   */
  model: z.string().optional(),
  session_id: z.string(),
  trace_id: z.string(),
  warnings: z.array(WarningSchema),
  /**
   * The final step's thinking (reasoning models, docs/agent.md#thinking-and-structured-output);
   * `""` when it did not think.
   */
  reasoning: z.string(),
  /** With `response_format`: the answer parsed, valid against the schema. */
  json: z.unknown().optional(),
  /**
   * What the turn cost, summed over its steps, from llama-server's own counters
   * (docs/agent.md#prompt-reuse): `prompt_tokens - cached_tokens` is what it had to process; stored
   * with the turn's answer.
   */
  usage: UsageSchema,
  /** Events of this chat the writer dropped because the host read too slowly. */
  dropped_events: z.number().int().nonnegative(),
  /**
   * Where the answer came from: what memory recalled for the turn, as `memory_done` listed it
   * (docs/protocol.md "Citations"); stored with the answer. Optional: cores before issue 29 leave it out.
   */
  sources: z.array(SourceSchema).optional(),
});
export type ChatResult = z.infer<typeof ChatResultSchema>;

const step = z.number().int().nonnegative();

/** The fields of each chat event (beside id, type and event). */
export const ChatEventFields = {
  run_start: z.object({ user_input: z.string(), trace_id: z.string(), session_id: z.string() }),
  memory_start: z.object({}),
  /** `sources`: each recalled passage's citation (docs/protocol.md "Citations"), best first. */
  memory_done: z.object({ hits: z.number().int().nonnegative(), sources: z.array(SourceSchema) }),
  llm_start: z.object({ step }),
  llm_chunk: z.object({ step, delta: z.string() }),
  /** The model's thinking as it streams (llama-server's `reasoning_content`), before its answer. */
  llm_reasoning: z.object({ step, delta: z.string() }),
  llm_done: z.object({ step }),
  tool_start: z.object({ step, tool: z.string(), args: z.unknown() }),
  tool_done: z.object({
    step,
    tool: z.string(),
    status: z.enum(["ok", "error", "denied"]),
    preview: z.string(),
    retryable: z.boolean(),
    ms: z.number().nonnegative(),
  }),
  final: z.object({ step, response: z.string() }),
  loop_abort: z.object({ step, reason: LoopAbortReasonSchema }),
  /** Before `llm_start`, while llama-server starts, restarts or wakes (the same events as warmup's). */
  warmup_progress: WarmupProgressFields,
} as const;
export type ChatEventName = keyof typeof ChatEventFields;
/** Each chat event's fields by name, for a typed `emit`. */
export type ChatEvents = { [K in ChatEventName]: z.input<(typeof ChatEventFields)[K]> };

// The zod-free list of capabilities.ts must name exactly these (a compile error otherwise).
type Missing = Exclude<ChatEventName, ChatEventNameListed> | Exclude<ChatEventNameListed, ChatEventName>;
export const CHAT_EVENT_NAMES_COMPLETE: [Missing] extends [never] ? true : Missing = true;
