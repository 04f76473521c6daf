/** Chats idle this long after the last ended, memory's job may unload their model to embed (docs/agent.md). */
export const IDLE_BEFORE_TAKING_MS = 30_000;

/** Runs `fn` after `ms`; the function it answers cancels it (tests hand in their own clock). */
export type Later = (fn: () => void, ms: number) => () => void;

const realLater: Later = (fn, ms) => {
  const timer = setTimeout(fn, ms);
  timer.unref?.();
  return () => clearTimeout(timer);
};

/**
 * The chats running, counted by the composition root (services.ts) for every embedder it makes: a
 * store dropped and opened again makes a new embedder while chats run, and its room must know
 * them (a room counting none granted its room under a running chat).
 */
export class ChatsRunning {
  count = 0;
  private readonly ends = new Set<() => void>();

  /** A chat begins; the function it answers is its end (idempotent). */
  begin(): () => void {
    this.count += 1;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.count -= 1;
      for (const heard of [...this.ends]) heard();
    };
  }

  /** `heard` is told each chat's end until the function it answers is called. */
  listen(heard: () => void): () => void {
    this.ends.add(heard);
    return () => this.ends.delete(heard);
  }
}

/**
 * When memory's background job may take the room of an idle chat model (docs/agent.md, "How
 * recall ranks with vectors"; docs/supervisor.md, "What is unloaded, when"). Its asks are spare
 * (they take free room only) until one is refused for want of room; then, once no chat has run
 * for `idleMs`, it is granted the room: its asks are ordinary (they unload the idle chat model,
 * once) until a chat begins again. On a machine with room for one model, an ordinary ask after
 * every turn unloaded the chat's model, which the next turn loaded again: a reload per turn.
 */
export class EmbedRoom {
  private waiting = false;
  private cancel: (() => void) | undefined;
  private grant: AbortController | undefined;
  private readonly unlisten: () => void;

  constructor(
    /** Called when the room is granted: the job runs again, its asks ordinary. */
    private readonly granted: () => void,
    private readonly idleMs = IDLE_BEFORE_TAKING_MS,
    private readonly later: Later = realLater,
    private readonly chats = new ChatsRunning(),
  ) {
    this.unlisten = chats.listen(() => {
      if (this.waiting) this.arm();
    });
  }

  /**
   * The signal of the grant the job's asks may unload a model under, aborted when a chat begins
   * (its model is wanted again); undefined while its asks are spare.
   */
  ordinary(): AbortSignal | undefined {
    return this.grant?.signal;
  }

  /** A spare ask refused for want of free room: the ordinary ask waits for chats to be idle. */
  refused(): void {
    // Granted meanwhile (the wait ended while a spare ask was under way): the run the grant asked
    // for goes on ordinarily. A second wait would replace the grant unaborted, its asks kept past a chat's start.
    if (this.grant) return;
    this.waiting = true;
    if (!this.cancel) this.arm();
  }

  /** A chat begins: any wait and grant end. The function it answers is its end; the wait starts over then. */
  chatBegan(): () => void {
    const ended = this.chats.begin();
    this.disarm();
    this.grant?.abort(new Error("a chat began: its model is wanted"));
    this.grant = undefined;
    return ended;
  }

  /** Shutdown: no wait left running. */
  stop(): void {
    this.unlisten();
    this.disarm();
    this.waiting = false;
  }

  private arm(): void {
    this.disarm();
    if (this.chats.count > 0) return;
    this.cancel = this.later(() => {
      this.cancel = undefined;
      this.waiting = false;
      this.grant = new AbortController();
      this.granted();
    }, this.idleMs);
  }

  private disarm(): void {
    this.cancel?.();
    this.cancel = undefined;
  }
}
