import { ChatEventFields, type ChatEventName } from "../protocol/chat.ts";

/** Chat event names, in the order a turn emits them (SPEC §2). */
export const CHAT_EVENTS = Object.keys(ChatEventFields) as ChatEventName[];
