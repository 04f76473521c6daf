/** Chat event names, in the order a turn emits them (SPEC §2). */
export const CHAT_EVENTS = [
  "run_start",
  "memory_start",
  "llm_start",
  "llm_chunk",
  "llm_done",
  "tool_start",
  "tool_done",
  "final",
  "loop_abort",
] as const;
export type ChatEventName = (typeof CHAT_EVENTS)[number];
