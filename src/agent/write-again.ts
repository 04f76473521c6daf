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
 * A user message the core wrote (a request to write again), not the user: it is stored with its
 * turn, but it opens no turn, so `regenerate` and `replace_from` never take it for the user's,
 * nor does history trimming start a cut at it (context-budget.ts).
 */
export function isWriteAgain(content: string): boolean {
  return (
    content === REPLY_AGAIN || (content.startsWith(TOOL_CALL_AGAIN) && content.endsWith(TOOL_CALL_AGAIN_END))
  );
}
