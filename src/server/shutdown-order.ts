import { logUnexpected } from "../util/logger.ts";

/**
 * The services a core made, stopped once at shutdown in the reverse order of their making,
 * `last` ones after all the others (the store, which a last save still writes to).
 */
export class ShutdownOrder {
  private readonly stoppers: { name: string; stop: () => Promise<void>; last: boolean }[] = [];
  private stopping: Promise<void> | undefined;

  /** Whether shutdown has begun: nothing new should be made then. */
  get begun(): boolean {
    return this.stopping !== undefined;
  }

  /** `service`, to be stopped by `stop` at shutdown. */
  add<T>(name: string, service: T, stop: () => Promise<void>, o: { last?: boolean } = {}): T {
    this.stoppers.push({ name, stop, last: o.last === true });
    return service;
  }

  /** Stops every service once; safe to call from several shutdown paths at the same time. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const order = [...this.stoppers].reverse();
      for (const s of [...order.filter((s) => !s.last), ...order.filter((s) => s.last)]) await stopOne(s);
      // One made by another's stop (the store, first asked by a last save) is stopped after them.
      for (const s of this.stoppers.slice(order.length)) await stopOne(s);
    })();
    return this.stopping;
  }
}

async function stopOne({ name, stop }: { name: string; stop: () => Promise<void> }): Promise<void> {
  try {
    await stop();
  } catch (err) {
    logUnexpected(`stopping ${name} failed`, err);
  }
}
