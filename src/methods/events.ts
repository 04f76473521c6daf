/**
 * Chat event names in the order a turn emits them (SPEC §2). A plain list, so initialize
 * does not load the chat schemas; a test keeps it equal to ChatEventFields' keys.
 */
export const CHAT_EVENTS = [
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
