import { CHAT_EVENT_NAMES } from "../protocol/capabilities.ts";
import type { ChatEventName } from "./protocol-types.ts";

// The protocol's own zod-free list: the client bundle needs no zod. The check below fails the
// build when it and the generated protocol types drift apart.
export { CHAT_EVENT_NAMES };

type Missing = Exclude<ChatEventName, (typeof CHAT_EVENT_NAMES)[number]>;
// If this line fails to compile, a chat event was added to the protocol but not here.
export const CHAT_EVENTS_COMPLETE: [Missing] extends [never] ? true : Missing = true;

const known = new Set<string>(CHAT_EVENT_NAMES);
export function isChatEventName(name: string): name is ChatEventName {
  return known.has(name);
}
