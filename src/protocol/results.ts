import { z } from "zod";

/**
 * Result shapes of the methods other than chat (chat.ts) and plan (the planner's report), for
 * the method definitions in src/methods/, which the JSON Schema and the client types derive
 * from. Shapes still moving (doctor checks) are `.loose()`: a host may rely on the named
 * fields, and extra fields pass through.
 */

export const InitializeResultSchema = z
  .object({
    protocol_version: z.number().int().positive(),
    server: z.object({ name: z.string(), version: z.string() }).loose(),
    capabilities: z
      .object({
        parallel_chat: z
          .object({ supported: z.boolean(), max_concurrent: z.number().int().positive() })
          .loose(),
        cancel: z.object({ targeted: z.boolean() }).loose(),
        methods: z.array(z.string()),
        events: z.array(z.string()),
      })
      .loose(),
  })
  .loose();
export type InitializeResult = z.infer<typeof InitializeResultSchema>;

export const StatusResultSchema = z.object({ status: z.literal("ok") }).loose();
export type StatusResult = z.infer<typeof StatusResultSchema>;

export const CancelResultSchema = z.object({ cancelled: z.boolean() });
export type CancelResult = z.infer<typeof CancelResultSchema>;

/**
 * One doctor check. `skip`: not run because a check it depends on failed (a missing config, an
 * unreadable model), so one cause is reported as one failure.
 */
export const DoctorCheckSchema = z
  .object({
    id: z.string(),
    status: z.enum(["ok", "warn", "fail", "skip"]),
    message: z.string(),
    fix: z.string().optional(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();
export type DoctorCheck = z.infer<typeof DoctorCheckSchema>;

export const DoctorResultSchema = z.object({ ok: z.boolean(), checks: z.array(DoctorCheckSchema) }).loose();
export type DoctorResult = z.infer<typeof DoctorResultSchema>;

/** `warmup`: llama-server is up and ready for chats. */
export const WarmupResultSchema = z.object({
  status: z.literal("ready"),
  elapsed_ms: z.number().nonnegative(),
  slots: z.number().int().positive(),
});

/** The fields of `warmup_progress` events (they live beside the other progress pieces). */
export { WarmupProgressFields } from "./progress.ts";
