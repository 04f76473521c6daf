/**
 * One turn of the event loop given back: reading a document works in slices and awaits this
 * between them, so pings, status and chats are answered while it runs (docs/agent.md "Documents").
 */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
