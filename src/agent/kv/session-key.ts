/** Which session: a turn's, and prompt reuse's key for its slot, record and files. */
export interface SessionKey {
  userId: string;
  sessionId: string;
}

/** The key as one string (the slot table's holder, the records' key). */
export function keyText(key: SessionKey): string {
  return `${key.userId}/${key.sessionId}`;
}

/** A key's string read back: user and session ids are safe ids, neither holds a "/". */
export function keyOf(text: string): SessionKey {
  const at = text.indexOf("/");
  return { userId: text.slice(0, at), sessionId: text.slice(at + 1) };
}
