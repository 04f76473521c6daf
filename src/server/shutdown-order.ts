import { logUnexpected } from "../util/logger.ts";

interface Stopper {
  name: string;
  stop: () => Promise<void>;
  last: boolean;
  beside: boolean;
}

/**
 * The services a core made, stopped once at shutdown in the reverse order of their making,
 * `last` ones after all the others (the store, which a last save still writes to); `beside` ones
 * from the start, at the same time as the rest (MCP servers, which need none of them: in line,
 * a hung one's 4 s came on top of the KV save and llama-server's grace, past the client's wait).
 */
export class ShutdownOrder {
  private readonly stoppers: Stopper[] = [];
  private stopping: Promise<void> | undefined;

  /** Whether shutdown has begun: nothing new should be made then. */
  get begun(): boolean {
    return this.stopping !== undefined;
  }

  /** `service`, to be stopped by `stop` at shutdown. */
  add<T>(
    name: string,
    service: T,
    stop: () => Promise<void>,
    o: { last?: boolean; beside?: boolean } = {},
  ): T {
    this.stoppers.push({ name, stop, last: o.last === true, beside: o.beside === true });
    return service;
  }

  /** Stops every service once; safe to call from several shutdown paths at the same time. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const order = [...this.stoppers].reverse();
      const beside = Promise.all(order.filter((s) => s.beside).map(stopOne));
      const inLine = order.filter((s) => !s.beside);
      for (const s of inLine.filter((s) => !s.last)) await stopOne(s);
      await beside;
      for (const s of inLine.filter((s) => s.last)) await stopOne(s);
      // One made by another's stop (the store, first asked by a last save) is stopped after them.
      for (const s of this.stoppers.slice(order.length)) await stopOne(s);
    })();
    return this.stopping;
  }
}

async function stopOne({ name, stop }: Pick<Stopper, "name" | "stop">): Promise<void> {
  try {
    await stop();
  } catch (err) {
    logUnexpected(`stopping ${name} failed`, err);
  }
}
