import { markdownText } from "./markdown-text.ts";
import type { SessionSummary, StoredMessage } from "./message-rows.ts";

/** `sessions.export`'s formats: a document for a person, or the data for a program. */
export type ExportFormat = "markdown" | "json";

export function exportSession(
  format: ExportFormat,
  session: SessionSummary,
  messages: readonly StoredMessage[],
): string {
  return format === "json"
    ? `${JSON.stringify({ session, messages }, null, 2)}\n`
    : toMarkdown(session, messages);
}

const ROLE_HEADINGS: Record<StoredMessage["role"], string> = {
  user: "User",
  assistant: "Assistant",
  tool: "Tool result",
  system: "System",
};

/**
 * The conversation as Markdown: a heading per message, tool calls and results in fenced
 * blocks (fences longer than any run of backticks inside, so no message can close one early),
 * message text and reasoning escaped so that none can forge a heading or swallow what follows.
 */
export function toMarkdown(session: SessionSummary, messages: readonly StoredMessage[]): string {
  const out = [
    `# ${oneLine(session.title) || session.session_id}`,
    "",
    `Session \`${session.session_id}\` · agent ${session.agent || "?"} · started ${session.created_at}`,
  ];
  for (const m of messages) {
    out.push("", `## ${ROLE_HEADINGS[m.role]} · ${m.created_at}`, "");
    if (m.reasoning)
      out.push("<details><summary>Thinking</summary>", "", markdownText(m.reasoning), "", "</details>", "");
    if (m.role === "tool") out.push(fenced(m.content ?? ""));
    else if (m.content) out.push(markdownText(m.content));
    for (const call of m.tool_calls ?? []) {
      out.push("", `Tool call \`${call.function.name}\`:`, "", fenced(call.function.arguments, "json"));
    }
  }
  return `${out.join("\n")}\n`;
}

function fenced(text: string, lang = ""): string {
  const longest = Math.max(2, ...Array.from(text.matchAll(/`+/g), (m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${lang}\n${text}\n${fence}`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}
