import type { ChatMessage } from "../protocol/chat-message.ts";

/**
 * The core's own requests to write again, in their fixed parts: agent/turn/marker-break.ts leaves
 * those whole (they show the model the markers to use), and only those.
 */
export const TOOL_CALL_AGAIN = "Your tool call could not be used:";
export const TOOL_CALL_AGAIN_END =
  '. Write it again as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> with valid JSON, or answer without tools.';
export const REPLY_AGAIN =
  "Your reply could not be read: it does not follow this chat's format for answers and tool calls. Write it again, as plain text or as a tool call in the format you were given.";

/**
 * A request to write again as the turn keeps it: a user message to the model, marked as the
 * core's (`by_core`, a column of its row), never told from the user's by its text.
 */
export function writeAgainRequest(content: string): ChatMessage {
  return { role: "user", content, by_core: true };
}

/**
 * A user message the core wrote (a request to write again), not the user: it is stored with its
 * turn, but it opens no turn, so `regenerate` and `replace_from` never take it for the user's,
 * nor does history trimming start a cut at it (context-budget.ts), and `sessions.*` leave it out.
 * A user's own message of the same text is the user's.
 */
export function isWriteAgain(m: ChatMessage): boolean {
  return m.role === "user" && m.by_core === true;
}
