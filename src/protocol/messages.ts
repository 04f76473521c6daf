import { z } from "zod";
import { ERROR_CODES, ERROR_REASONS } from "./errors.ts";
import type { ExactNumberId } from "./exact-id.ts";

export const ErrorCodeSchema = z.enum(ERROR_CODES);
export const ErrorReasonSchema = z.enum(ERROR_REASONS);

export const RequestIdSchema = z.union([z.string(), z.number()]);
/** On the wire a string or a number; inside the core a number a double cannot hold is its text. */
export type RequestId = z.infer<typeof RequestIdSchema> | ExactNumberId;
type WithId<T> = Omit<T, "id"> & { id: RequestId };

export const RequestSchema = z.object({
  id: RequestIdSchema,
  method: z.string().min(1),
  params: z.record(z.string(), z.unknown()).optional(),
});
export type Request = z.infer<typeof RequestSchema>;

/** Event fields sit at the top level beside id, type and event. */
export const EventMessageSchema = z
  .object({
    id: RequestIdSchema,
    type: z.literal("event"),
    event: z.string(),
  })
  .catchall(z.unknown());
export type EventMessage = WithId<z.infer<typeof EventMessageSchema>>;

export const ResultMessageSchema = z.object({
  id: RequestIdSchema,
  type: z.literal("result"),
  result: z.unknown(),
});
export type ResultMessage = WithId<z.infer<typeof ResultMessageSchema>>;

export const ErrorMessageSchema = z.object({
  id: RequestIdSchema.nullable(),
  type: z.literal("error"),
  code: ErrorCodeSchema,
  message: z.string(),
  /** Details; `reason` (when present) is one of the known reasons, other fields are free. */
  data: z.object({ reason: ErrorReasonSchema.optional() }).catchall(z.unknown()).optional(),
});
export type ErrorMessage = Omit<z.infer<typeof ErrorMessageSchema>, "id"> & { id: RequestId | null };

export type OutboundMessage = EventMessage | ResultMessage | ErrorMessage;
