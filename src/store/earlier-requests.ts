/**
 * The core's requests to write again as the versions before the `by_core` mark wrote them
 * (agent/write-again.ts), frozen: those versions kept them as plain user messages, in the
 * database (migration 7 marks them) and in the 0.1 files (import-v01.ts). The current words may
 * change; these may not.
 */
const REPLY_AGAIN =
  "Your reply could not be read: it does not follow this chat's format for answers and tool calls. Write it again, as plain text or as a tool call in the format you were given.";
const TOOL_CALL_AGAIN = "Your tool call could not be used: ";
const TOOL_CALL_AGAIN_END =
  '. Write it again as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> with valid JSON, or answer without tools.';

/** Whether a stored user message's text is one of those requests. */
export function wasWriteAgain(content: string): boolean {
  return (
    content === REPLY_AGAIN || (content.startsWith(TOOL_CALL_AGAIN) && content.endsWith(TOOL_CALL_AGAIN_END))
  );
}

const quoted = (text: string) => `'${text.replaceAll("'", "''")}'`;

/** The same test in SQL, over a `content` column. */
export const WAS_WRITE_AGAIN_SQL = `(content = ${quoted(REPLY_AGAIN)}
  OR (substr(content, 1, ${TOOL_CALL_AGAIN.length}) = ${quoted(TOOL_CALL_AGAIN)}
    AND substr(content, -${TOOL_CALL_AGAIN_END.length}) = ${quoted(TOOL_CALL_AGAIN_END)}))`;
