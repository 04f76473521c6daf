/** A session's key in prompt reuse (reuse.ts): its user and session ids. */
export interface SessionKey {
  userId: string;
  sessionId: string;
}

export function keyText(key: SessionKey): string {
  return `${key.userId}/${key.sessionId}`;
}

/** user and session ids are safe ids: neither holds a "/". */
export function keyOf(text: string): SessionKey {
  const at = text.indexOf("/");
  return { userId: text.slice(0, at), sessionId: text.slice(at + 1) };
}

const launches = new WeakMap<AbortSignal, number>();
let launchCount = 0;

/** A number per launch: its `died` signal names it. */
export function launchId(died: AbortSignal): number {
  let id = launches.get(died);
  if (id === undefined) {
    id = ++launchCount;
    launches.set(died, id);
  }
  return id;
}
