import type { AgentConfig } from "../../config/schema.ts";
import type { ChatMessage, ToolCall } from "../../protocol/chat-message.ts";
import type { MemoryHit as Hit } from "../../store/memory-store.ts";
import { oneLine } from "../../util/one-line.ts";
import { cutText } from "../../util/text-cut.ts";
import type { NoteRecord } from "../kv/prompt-record.ts";
import { REPLY_AGAIN, TOOL_CALL_AGAIN, TOOL_CALL_AGAIN_END, writeAgainRequest } from "../write-again.ts";

/** Longest memory passage put into the prompt. */
const MEMORY_SNIPPET_CHARS = 600;

/**
 * The agent's system prompt, the same every turn: what changes per turn (memory notes) goes with
 * the user message instead (docs/agent.md#prompt-reuse), or llama-server would process the whole
 * conversation again whenever memory finds something (test/fixtures/llama-server/transcripts/92b).
 */
export function systemMessage(agent: AgentConfig): ChatMessage {
  return { role: "system", content: agent.system_prompt };
}

/**
 * The memory passages that matched the input, as notes for the user message `seq`, leaving out
 * those the prompt already carries (`sent`: their ids); none when nothing is new.
 */
export function memoryNotes(
  hits: readonly Hit[],
  seq: number,
  sent: ReadonlySet<string>,
): NoteRecord | undefined {
  const fresh = hits.filter((h) => !sent.has(noteId(h)));
  if (fresh.length === 0) return undefined;
  // A folder's file is named by its path, which may hold line breaks: shown on one line, or its
  // name would end the note and pass for the user's words after a rule.
  const lines = fresh.map((h) => `- (${oneLine(h.doc.source)}) ${passage(h.doc.text)}`);
  return {
    seq,
    text: `Notes from memory that may be relevant (use them only if they help):\n${lines.join("\n")}`,
    ids: fresh.map(noteId),
    sources: [...new Set(fresh.map((h) => h.doc.source))],
  };
}

/**
 * A passage as a note: cut to MEMORY_SNIPPET_CHARS, its own lines indented, so that its text (a
 * document's, anyone's) never starts a line: at the start of one it read to the model as a note
 * of another source, or, after a rule, as the end of the notes and the user's own words.
 */
function passage(text: string): string {
  return cutText(text, MEMORY_SNIPPET_CHARS).replace(/\r\n|\r|\n/g, "\n  ");
}

/** A passage's identity across turns. */
const noteId = (h: Hit) => `${h.doc.source}#${h.doc.id}`;

/**
 * A user message as sent with its notes: in its own content, before the user's words, so a
 * template that takes one system message only at the top renders it, and the history keeps
 * the user's words alone.
 */
export function withNotes(message: ChatMessage, note: NoteRecord | undefined): ChatMessage {
  if (!note || message.role !== "user") return message;
  return { ...message, content: `${note.text}\n\n---\n\n${message.content}` };
}

/**
 * What a malformed tool call leaves in the turn, telling the model what was wrong: a tool
 * message per native call, each with its own call's problem (the whole list in each would grow
 * with the square of the calls: docs/agent.md#tool-calls), or, for a call written in the text,
 * the reply and a user message asking for it again. `problems` is the step's list, already
 * bounded (tool-calls.ts).
 */
export function repromptMessages(
  malformed: { text: string; toolCalls: ToolCall[]; callProblems: (string | undefined)[] },
  content: string,
  problems: string,
): ChatMessage[] {
  if (malformed.toolCalls.length > 0) {
    return [
      { role: "assistant", content: malformed.text || null, tool_calls: malformed.toolCalls },
      ...malformed.toolCalls.map((tc, i) => {
        const own = malformed.callProblems[i];
        return {
          role: "tool" as const,
          tool_call_id: tc.id,
          content:
            own !== undefined
              ? `Not run: the call was malformed (${own}). Fix it and call again.`
              : "Not run: other calls of this step were malformed. Call it again with them fixed.",
        };
      }),
    ];
  }
  return [
    { role: "assistant", content },
    writeAgainRequest(`${TOOL_CALL_AGAIN} ${problems}${TOOL_CALL_AGAIN_END}`),
  ];
}

/** Why an unparsed reply is written again, as max_parse_errors reports it. */
export const UNREADABLE = "llama-server could not read the reply in this model's chat format";

/** What an unparsed reply leaves in the turn: what was streamed of it, and a request to write it again. */
export function unreadableMessages(content: string): ChatMessage[] {
  return [{ role: "assistant", content }, writeAgainRequest(REPLY_AGAIN)];
}
