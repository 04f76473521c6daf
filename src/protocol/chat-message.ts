import { z } from "zod";

/**
 * The OpenAI chat message shapes llama-server accepts, as stored in history and checkpoints.
 * Here, on the floor below both the store and the agent, which use them, and sessions.get shows them.
 */
export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

/**
 * An image kept with a user message (docs/protocol.md#images): its id in the store, its type and
 * size. The bytes stay in the store; a request to llama-server carries them as a content part.
 */
export const AttachmentRefSchema = z.object({
  id: z.number().int().positive(),
  mime: z.string(),
  bytes: z.number().int().nonnegative(),
});
export type AttachmentRef = z.infer<typeof AttachmentRefSchema>;

export const ChatMessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content: z.string() }),
  z.object({
    role: z.literal("user"),
    content: z.string(),
    /** Its images, in order; sent after its text as `image_url` parts (llama/ never sees this field). */
    attachments: z.array(AttachmentRefSchema).optional(),
    /**
     * The core wrote it, not the user: a request to write again (agent/write-again.ts). Sent to
     * the model as a user message, without this field; `sessions.*` do not show it.
     */
    by_core: z.literal(true).optional(),
  }),
  z.object({
    role: z.literal("assistant"),
    content: z.string().nullable(),
    tool_calls: z.array(ToolCallSchema).optional(),
    /**
     * What the model thought before this message, sent back within its turn (a thinking model
     * calling tools needs it; llama-server hands it to the template,
     * test/fixtures/llama-server/transcripts/91f, and a `null` there is its 500, 91g: absent or a
     * string). The store keeps it as `reasoning`, and later turns' history leaves it out.
     */
    reasoning_content: z.string().optional(),
  }),
  z.object({ role: z.literal("tool"), tool_call_id: z.string(), content: z.string() }),
]);
export type ChatMessage = z.infer<typeof ChatMessageSchema>;
