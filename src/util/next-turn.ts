/**
 * One turn of the event loop given back: work in slices (a document's read, a models listing, a
 * GGUF header's scan, a long answer's write) awaits this between them, so pings, status and chats
 * are answered while it runs (docs/agent.md "Documents").
 */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
