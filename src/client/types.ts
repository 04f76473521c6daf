/**
 * The client's protocol types. They are the core's zod types printed out as plain TypeScript
 * (protocol-types.ts, generated), so a host's type check needs no zod;
 * test/client/protocol-types.test.ts proves them equal to the zod originals.
 */
// Every one of them, so that a type the generator gains reaches hosts by name without a list here.
export type * from "./protocol-types.ts";

import type { ChatEvent, ChatEventName, RequestId } from "./protocol-types.ts";

/** Narrows a chat event by name: `ChatEventOf<"llm_chunk">`. */
export type ChatEventOf<K extends ChatEventName> = Extract<ChatEvent, { event: K }>;

/** An event of a method without a typed event list (test methods, methods newer than the client). */
export interface GenericEvent {
  id: RequestId;
  type: "event";
  event: string;
  [field: string]: unknown;
}
