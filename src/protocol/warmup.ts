import { z } from "zod";
import { SafeIdSchema } from "./safe-id.ts";
import { WarmupProgressFields } from "./warmup-progress.ts";

/** `warmup`: starts llama-server ahead of the first chat, streaming `warmup_progress`. */
export const WarmupParamsSchema = z.object({
  /**
   * Accepted for hosts written against 0.1, where it named whose memory index to build; the
   * database now holds every user's memory, and warmup opens it for all.
   */
  user_id: SafeIdSchema.default("default_user"),
});

/** llama-server is up and ready for chats. */
export const WarmupResultSchema = z.object({
  status: z.literal("ready"),
  elapsed_ms: z.number().nonnegative(),
  slots: z.number().int().positive(),
});

export const WarmupEventFields = { warmup_progress: WarmupProgressFields } as const;
