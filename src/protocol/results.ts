import { z } from "zod";
import { ChatResultSchema } from "./chat.ts";

/**
 * Result shapes of the methods other than chat, for the typed client and the JSON Schema.
 * Shapes still moving (doctor checks, the plan report) are `.loose()`: a host may rely on the
 * named fields, and extra fields pass through.
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

export const DoctorCheckSchema = z
  .object({
    id: z.string(),
    status: z.enum(["ok", "warn", "fail"]),
    message: z.string(),
    fix: z.string().optional(),
    data: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();
export type DoctorCheck = z.infer<typeof DoctorCheckSchema>;

export const DoctorResultSchema = z.object({ ok: z.boolean(), checks: z.array(DoctorCheckSchema) }).loose();
export type DoctorResult = z.infer<typeof DoctorResultSchema>;

/** The plan preview; its fields are owned by the planner and still growing. */
export const PlanResultSchema = z.object({}).loose();
export type PlanResult = z.infer<typeof PlanResultSchema>;

/** Every method's result, by name (chat included), for the client and the JSON Schema. */
/** `warmup`: llama-server is up and ready for chats. */
export const WarmupResultSchema = z.object({
  status: z.literal("ready"),
  elapsed_ms: z.number().nonnegative(),
  slots: z.number().int().positive(),
});

/** The fields of `warmup_progress` events, as the supervisor reports its start. */
export const WarmupProgressFields = z.discriminatedUnion("phase", [
  z.object({ phase: z.literal("starting"), attempt: z.number().int().positive() }),
  z.object({ phase: z.literal("loading"), elapsed_ms: z.number().nonnegative() }),
  z.object({ phase: z.literal("ready"), elapsed_ms: z.number().nonnegative() }),
]);

export const RESULT_SCHEMAS = {
  initialize: InitializeResultSchema,
  ping: StatusResultSchema,
  doctor: DoctorResultSchema,
  plan: PlanResultSchema,
  chat: ChatResultSchema,
  cancel: CancelResultSchema,
  shutdown: StatusResultSchema,
  warmup: WarmupResultSchema,
} as const;
