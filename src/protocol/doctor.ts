import { z } from "zod";

/** `doctor`: no params; any sent are dropped unread (a lone surrogate in one is not refused). */
export const DoctorParamsSchema = z.object({});

/**
 * One doctor check. `skip`: not run because a check it depends on failed (a missing config, an
 * unreadable model), so one cause is reported as one failure. Loose, as the checks still move:
 * a host may rely on the named fields, and extra fields pass through.
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
