import type { z } from "zod";
import {
  type AttachmentRef,
  type ChatMessage,
  type ToolCall,
  ToolCallSchema,
} from "../protocol/chat-message.ts";
import type { SessionSummarySchema, StoredMessageSchema } from "../protocol/sessions.ts";
import type { Usage } from "../protocol/usage.ts";

// Rows of the sessions and messages tables as the model and `sessions.*` see them (pure).

/** A message as `sessions.get` shows it. */
export type StoredMessage = z.infer<typeof StoredMessageSchema>;

export type SessionSummary = z.infer<typeof SessionSummarySchema>;

export interface MessageRow {
  seq: number;
  role: ChatMessage["role"];
  content: string | null;
  reasoning: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  usage: string | null;
  created_at: number;
  /** 1: the core wrote it (a request to write again, agent/write-again.ts); sessions.* never read those. */
  by_core?: number;
  /** JSON; absent where the query does not read it (the model's history). */
  sources?: string | null;
}

export interface SessionRow {
  session_id: string;
  title: string;
  agent: string;
  created_at: number;
  updated_at: number;
  message_count: number;
  preview: string;
}

const iso = (ms: number) => new Date(ms).toISOString();
export function summaryOf(row: SessionRow): SessionSummary {
  return {
    session_id: row.session_id,
    title: row.title,
    agent: row.agent,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
    message_count: row.message_count,
    preview: row.preview,
  };
}

/** The model's view of a stored message: reasoning and usage stay behind; a user message's images come along. */
export function modelMessage(row: MessageRow, attachments?: AttachmentRef[]): ChatMessage {
  switch (row.role) {
    case "assistant": {
      const calls = parseToolCalls(row.tool_calls);
      return { role: "assistant", content: row.content, ...(calls ? { tool_calls: calls } : {}) };
    }
    case "tool":
      return { role: "tool", tool_call_id: row.tool_call_id ?? "", content: row.content ?? "" };
    case "user":
      return {
        role: "user",
        content: row.content ?? "",
        ...(attachments?.length ? { attachments } : {}),
        ...(row.by_core ? { by_core: true as const } : {}),
      };
    default:
      return { role: row.role, content: row.content ?? "" };
  }
}

function parseToolCalls(text: string | null): ToolCall[] | undefined {
  if (!text) return undefined;
  const parsed = ToolCallSchema.array().safeParse(JSON.parse(text));
  return parsed.success && parsed.data.length > 0 ? parsed.data : undefined;
}

export function storedMessage(row: MessageRow, attachments?: AttachmentRef[]): StoredMessage {
  const calls = parseToolCalls(row.tool_calls);
  return {
    seq: row.seq,
    role: row.role,
    content: row.content,
    ...(attachments?.length ? { attachments } : {}),
    ...(row.reasoning !== null ? { reasoning: row.reasoning } : {}),
    ...(calls ? { tool_calls: calls } : {}),
    ...(row.tool_call_id !== null ? { tool_call_id: row.tool_call_id } : {}),
    created_at: iso(row.created_at),
    ...(row.usage !== null ? { usage: JSON.parse(row.usage) as Usage } : {}),
  };
}
