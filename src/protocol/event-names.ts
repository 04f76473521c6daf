/**
 * The names of every event the core may send, as plain strings: `initialize` lists them
 * without loading the zod schemas (cold start). chat.ts checks the chat names against its
 * schemas and methods/index.ts checks the whole list against the method definitions, both at
 * compile time.
 */
export const CHAT_EVENT_NAMES = [
  "run_start",
  "memory_start",
  "memory_done",
  "llm_start",
  "llm_chunk",
  "llm_done",
  "tool_start",
  "tool_done",
  "final",
  "loop_abort",
] as const;
export type ChatEventName = (typeof CHAT_EVENT_NAMES)[number];

export const EVENT_NAMES = [...CHAT_EVENT_NAMES, "warmup_progress"] as const;
export type EventName = (typeof EVENT_NAMES)[number];
