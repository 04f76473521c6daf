import { markerBreaker } from "../../llama/special-text.ts";
import type { ChatMessage } from "../../protocol/chat-message.ts";
import { TOOL_CALL_AGAIN_END } from "../write-again.ts";

/**
 * A step's messages as sent: every marker of the model (llama/special-text.ts) in text the core
 * did not write itself broken, so a document, a tool result, a model's earlier words or the input
 * cannot open a turn of their own (docs/agent.md, "Special-token text"). Left whole: the
 * system prompt (the host's), and the core's own requests to write a tool call again (marked
 * `by_core`, never told by their text), which show the model the markers to use. The same every
 * step, so the prompt's prefix stays the same. The `by_core` mark itself is not sent.
 */
export function breakMarkers(messages: ChatMessage[], markers: readonly string[]): ChatMessage[] {
  if (markers.length === 0 && !messages.some((m) => m.role === "user" && m.by_core)) return messages;
  const b = markers.length === 0 ? (text: string) => text : markerBreaker(markers);
  return messages.map((m): ChatMessage => {
    if (m.role === "system") return m;
    if (m.role === "user") return userSent(m, b);
    // Ids too: a model writes its own in some formats, and some templates (Mistral's) render them.
    if (m.role === "tool") return { ...m, tool_call_id: b(m.tool_call_id), content: b(m.content) };
    return {
      ...m,
      content: m.content === null ? null : b(m.content),
      ...(m.reasoning_content !== undefined ? { reasoning_content: b(m.reasoning_content) } : {}),
      ...(m.tool_calls
        ? {
            tool_calls: m.tool_calls.map((c) => ({
              ...c,
              id: b(c.id),
              // The name too: a malformed call goes back with the name the model made up.
              function: { name: b(c.function.name), arguments: b(c.function.arguments) },
            })),
          }
        : {}),
    };
  });
}

/**
 * A user message as sent: its text broken, but for the core's own requests: a reply's is all the
 * core's text; a tool call's quotes the model's text, so only its fixed end stays whole.
 */
function userSent(m: ChatMessage & { role: "user" }, b: (text: string) => string): ChatMessage {
  const { by_core: core, ...message } = m;
  if (!core) return { ...message, content: b(m.content) };
  if (!m.content.endsWith(TOOL_CALL_AGAIN_END)) return message;
  const head = m.content.slice(0, -TOOL_CALL_AGAIN_END.length);
  return { ...message, content: `${b(head)}${TOOL_CALL_AGAIN_END}` };
}
