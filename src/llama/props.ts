import { createHash } from "node:crypto";
import { z } from "zod";
import { propsThinking } from "./chat-template.ts";
import { LlmError } from "./errors.ts";
import { callJson, type LlamaEndpoint } from "./http.ts";
import { templateMarkers } from "./special-text.ts";

/**
 * GET /props (test/fixtures/llama-server/transcripts/04, 86, 91h): the server's settings as it
 * runs. It answers without waking a sleeping server, and only with the key. Each field is read on
 * its own: one of an unexpected shape is null, the rest still count. The chat template itself
 * (kilobytes) is not kept: only whether it lets the model think, and its hash (a saved KV state is
 * valid for one template: agent/kv/fingerprint.ts).
 */

/** A field that is null when absent or not of the expected shape. */
const orNull = <T extends z.ZodType>(schema: T) => schema.nullable().catch(null);

/** What the model's chat template can do (91h: `supports_preserve_reasoning` for thinking templates). */
export const ChatTemplateCapsSchema = z.object({
  supports_tools: z.boolean().optional(),
  supports_tool_calls: z.boolean().optional(),
  supports_parallel_tool_calls: z.boolean().optional(),
  supports_system_role: z.boolean().optional(),
  supports_preserve_reasoning: z.boolean().optional(),
  supports_reasoning_effort: z.boolean().optional(),
  supports_string_content: z.boolean().optional(),
  supports_typed_content: z.boolean().optional(),
  supports_object_arguments: z.boolean().optional(),
});

export const PropsSchema = z
  .object({
    /** llama.cpp's n_ctx is a uint32_t: a fraction or more is no server's, and budgets scale from it. */
    default_generation_settings: orNull(
      z.object({
        n_ctx: orNull(
          z
            .number()
            .int()
            .positive()
            .max(2 ** 32 - 1),
        ),
      }),
    ),
    total_slots: orNull(z.number().int().positive()),
    /** Idle sleep (`--sleep-idle-seconds`, 86): the one field that changes while it sleeps. */
    is_sleeping: orNull(z.boolean()),
    chat_template_caps: orNull(ChatTemplateCapsSchema),
    chat_template: orNull(z.string()),
    modalities: orNull(z.object({ vision: z.boolean(), audio: z.boolean(), video: z.boolean().optional() })),
    build_info: orNull(z.string()),
    /** The model file as llama-server opened it (an `hf:` path already resolved). */
    model_path: orNull(z.string()),
    bos_token: orNull(z.string()),
    eos_token: orNull(z.string()),
  })
  .transform(
    ({ default_generation_settings: settings, chat_template: template, bos_token, eos_token, ...rest }) => ({
      /** The context of one slot (`-c` divided by the slots). */
      n_ctx: settings?.n_ctx ?? null,
      /** Whether the template lets the model think (chat-template.ts); null when /props says neither way. */
      thinking: propsThinking(rest.chat_template_caps, template),
      ...rest,
      /** The markers text must not spell in a request (special-text.ts): the template's, BOS, EOS. */
      markers: templateMarkers(template, bos_token, eos_token),
      /** SHA-256 of the chat template in use, hex. */
      chat_template_hash: template === null ? null : createHash("sha256").update(template).digest("hex"),
    }),
  );

export type LlamaProps = z.output<typeof PropsSchema>;
export type ChatTemplateCaps = z.output<typeof ChatTemplateCapsSchema>;

/**
 * A /props body as the core reads it; bad_response when it is not an object at all. Without
 * zod's compiled fast path: /props is read once a load, on the way from the ready server to the
 * first request, and the compile cost more than it saves (bench/first-parse.ts).
 */
export function parseProps(body: unknown): LlamaProps {
  const parsed = PropsSchema.safeParse(body, { jitless: true });
  if (!parsed.success) throw new LlmError("bad_response", "llama-server's /props is not an object");
  return parsed.data;
}

export async function readProps(
  server: LlamaEndpoint,
  options: { signal?: AbortSignal; timeoutMs: number },
): Promise<LlamaProps> {
  return parseProps(await callJson(server, "/props", options));
}

/** How long a look at /props may take; it answers at once unless the server is busy waking. */
const SLEEP_LOOK_TIMEOUT_MS = 2000;

/** `is_sleeping`: whether llama-server has unloaded its model; null when unknown. */
export async function isSleeping(server: LlamaEndpoint): Promise<boolean | null> {
  try {
    return (await readProps(server, { timeoutMs: SLEEP_LOOK_TIMEOUT_MS })).is_sleeping;
  } catch {
    return null;
  }
}
