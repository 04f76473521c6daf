import { z } from "zod";
import { type PromptRecord, PromptRecordSchema } from "./prompt-record.ts";

/** A session's saved KV state's sidecar (`<name>.json` beside its `.bin`, kv-disk.ts): whose, for what, how big. */
export const SidecarSchema = z.object({
  version: z.literal(1),
  user_id: z.string(),
  session_id: z.string(),
  fingerprint: z.string(),
  tokens: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  saved_at: z.number(),
  used_at: z.number(),
  prompt: PromptRecordSchema,
  /** Sessions and files the saved tokens hold passages of (its memory notes). */
  note_sources: z.array(z.string()),
});
export type KvEntry = z.infer<typeof SidecarSchema>;

/** A session's saved state as the disk will describe it. */
export function entryOf(
  key: { userId: string; sessionId: string },
  fingerprint: string,
  saved: { n_saved: number; n_written: number },
  prompt: PromptRecord,
  sources: string[],
  now: number,
): KvEntry {
  return {
    version: 1,
    user_id: key.userId,
    session_id: key.sessionId,
    fingerprint,
    tokens: saved.n_saved,
    bytes: saved.n_written,
    saved_at: now,
    used_at: now,
    prompt,
    note_sources: sources,
  };
}

/** Whether two sidecars describe the same save (`used_at` aside). */
export function sameSave(a: KvEntry, b: KvEntry): boolean {
  return JSON.stringify({ ...a, used_at: 0 }) === JSON.stringify({ ...b, used_at: 0 });
}
