import { z } from "zod";

/**
 * `user_id` and `session_id` (chat, warmup) become path segments under the data directory, so
 * they are restricted to a safe alphabet, never start with a dot, and are never a Windows
 * device name.
 */
const WINDOWS_RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\..*)?$/i;
export const SafeIdSchema = z
  .string()
  .min(1, "must be 1-128 characters")
  .max(128, "must be 1-128 characters")
  .regex(/^[A-Za-z0-9@+._-]+$/, "may contain only A-Z a-z 0-9 @ + . _ -")
  .refine((s) => !s.startsWith("."), "must not start with '.'")
  .refine((s) => !WINDOWS_RESERVED.test(s), "must not be a Windows reserved device name");
