import type { ChatEventName } from "./protocol-types.ts";

/**
 * The chat event names, kept here as plain strings so the client bundle needs no zod. The type
 * check below fails the build when the protocol's list and this one drift apart.
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
  "warmup_progress",
] as const satisfies readonly ChatEventName[];

type Missing = Exclude<ChatEventName, (typeof CHAT_EVENT_NAMES)[number]>;
// If this line fails to compile, a chat event was added to the protocol but not here.
export const CHAT_EVENTS_COMPLETE: [Missing] extends [never] ? true : Missing = true;

const known = new Set<string>(CHAT_EVENT_NAMES);
export function isChatEventName(name: string): name is ChatEventName {
  return known.has(name);
}
