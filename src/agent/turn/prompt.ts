import type { AgentConfig } from "../../config/schema.ts";
import type { ChatMessage, ToolCall } from "../../protocol/chat-message.ts";
import type { MemoryHit as Hit } from "../../store/memory-store.ts";

/** Longest memory passage put into the system prompt. */
const MEMORY_SNIPPET_CHARS = 600;

/** The agent's system prompt, with the memory passages that matched the input. */
export function systemMessage(agent: AgentConfig, hits: readonly Hit[]): ChatMessage {
  if (hits.length === 0) return { role: "system", content: agent.system_prompt };
  const notes = hits
    .map(
      (h) =>
        `- (${h.doc.source}) ${h.doc.text.length > MEMORY_SNIPPET_CHARS ? `${h.doc.text.slice(0, MEMORY_SNIPPET_CHARS)}…` : h.doc.text}`,
    )
    .join("\n");
  return {
    role: "system",
    content: `${agent.system_prompt}\n\nNotes from memory that may be relevant (use them only if they help):\n${notes}`,
  };
}

/**
 * What a malformed tool call leaves in the turn, telling the model what was wrong (`problems`):
 * a tool message per native call, or, for a call written in the text, the reply and a user
 * message asking for it again.
 */
export function repromptMessages(
  malformed: { text: string; toolCalls: ToolCall[] },
  content: string,
  problems: string,
): ChatMessage[] {
  if (malformed.toolCalls.length > 0) {
    return [
      { role: "assistant", content: malformed.text || null, tool_calls: malformed.toolCalls },
      ...malformed.toolCalls.map((tc) => ({
        role: "tool" as const,
        tool_call_id: tc.id,
        content: `Not run: the call was malformed (${problems}). Fix it and call again.`,
      })),
    ];
  }
  return [
    { role: "assistant", content },
    {
      role: "user",
      content: `Your tool call could not be used: ${problems}. Write it again as <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> with valid JSON, or answer without tools.`,
    },
  ];
}
