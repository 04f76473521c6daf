import type { z } from "zod";
import type { initialize } from "../methods/initialize.ts";
import type { ChatEventFields, ChatEventName, ChatParamsSchema } from "../protocol/chat.ts";
import type { RequestId } from "../protocol/messages.ts";

/**
 * The client's types, all derived from the core's zod schemas. Only types are imported, so
 * the client bundle carries no zod at runtime.
 */

export type { ChatEventName, ChatResult, Warning } from "../protocol/chat.ts";
export type { ErrorCode } from "../protocol/errors.ts";
export type { RequestId } from "../protocol/messages.ts";
export type {
  CancelResult,
  DoctorCheck,
  DoctorResult,
  InitializeResult,
  PlanResult,
  StatusResult,
} from "../protocol/results.ts";

/** What `chat()` accepts: every field has a default on the core's side. */
export type ChatParams = z.input<typeof ChatParamsSchema>;
export type InitializeParams = z.input<(typeof initialize)["params"]>;

/** One chat event as it arrives: its fields beside id, type and event. */
export type ChatEvent = {
  [K in ChatEventName]: { id: RequestId; type: "event"; event: K } & z.infer<(typeof ChatEventFields)[K]>;
}[ChatEventName];

/** Narrows a chat event by name: `ChatEventOf<"llm_chunk">`. */
export type ChatEventOf<K extends ChatEventName> = Extract<ChatEvent, { event: K }>;

/** An event of a method without a typed event list (warm-up, test methods). */
export interface GenericEvent {
  id: RequestId;
  type: "event";
  event: string;
  [field: string]: unknown;
}
