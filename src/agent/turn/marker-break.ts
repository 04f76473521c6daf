import { markerBreaker } from "../../llama/special-text.ts";
import type { ChatMessage } from "../../protocol/chat-message.ts";
import { REPLY_AGAIN, TOOL_CALL_AGAIN, TOOL_CALL_AGAIN_END } from "../write-again.ts";

/**
 * A step's messages as sent: every marker of the model (llama/special-text.ts) in text the core
 * did not write itself broken, so a document, a tool result, a model's earlier words or the input
 * cannot open a turn of their own (docs/agent.md, "Special-token text"). Left whole: the
 * system prompt (the host's), and the core's own requests to write a tool call again, which
 * show the model the markers to use. The same every step, so the prompt's prefix stays the same.
 */
export function breakMarkers(messages: ChatMessage[], markers: readonly string[]): ChatMessage[] {
  if (markers.length === 0) return messages;
  const b = markerBreaker(markers);
  return messages.map((m): ChatMessage => {
    if (m.role === "system") return m;
    if (m.role === "user") return { ...m, content: userText(m.content, b) };
    if (m.role === "tool") return { ...m, content: b(m.content) };
    return {
      ...m,
      content: m.content === null ? null : b(m.content),
      ...(m.reasoning_content !== undefined ? { reasoning_content: b(m.reasoning_content) } : {}),
      ...(m.tool_calls
        ? {
            tool_calls: m.tool_calls.map((c) => ({
              ...c,
              function: { name: c.function.name, arguments: b(c.function.arguments) },
            })),
          }
        : {}),
    };
  });
}

/** A user message's text broken, but for the fixed parts of the core's own requests to write again. */
function userText(content: string, b: (text: string) => string): string {
  if (content === REPLY_AGAIN) return content;
  // Its problems quote the model's text: only the fixed end is left whole.
  if (content.startsWith(TOOL_CALL_AGAIN) && content.endsWith(TOOL_CALL_AGAIN_END))
    return `${b(content.slice(0, -TOOL_CALL_AGAIN_END.length))}${TOOL_CALL_AGAIN_END}`;
  return b(content);
}
