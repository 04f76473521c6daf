/**
 * What `initialize` announces, as plain values so that answering it loads no zod schema (cold
 * start, docs/performance.md): the protocol versions, and the names of every event the core
 * may send. chat.ts checks the chat names against its schemas and methods/index.ts checks the
 * whole list against the method definitions, both at compile time.
 */

/** Protocol version(s) this core speaks. */
export const PROTOCOL_VERSIONS = [1] as const;

export const CHAT_EVENT_NAMES = [
  "run_start",
  "memory_start",
  "memory_done",
  "llm_start",
  "llm_chunk",
  "llm_reasoning",
  "llm_done",
  "tool_start",
  "tool_done",
  "final",
  "loop_abort",
  // While the chat waits for llama-server to start, restart or wake
  // (docs/protocol.md#warmup_progress).
  "warmup_progress",
] as const;
export type ChatEventName = (typeof CHAT_EVENT_NAMES)[number];

/**
 * Every event: the chat's include warmup's `warmup_progress`; a pull sends `download_progress`,
 * `documents.add` `index_progress`.
 */
export const EVENT_NAMES = [...CHAT_EVENT_NAMES, "download_progress", "index_progress"] as const;
export type EventName = (typeof EVENT_NAMES)[number];
