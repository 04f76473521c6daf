import type { LlamaEndpoint } from "./http.ts";

/** A streamed request's socket handlers (stream-socket.ts), which a spare hands its events to once taken. */
export interface SocketHandlers {
  open(s: Bun.Socket<undefined>): void;
  drain(s: Bun.Socket<undefined>): void;
  data(s: Bun.Socket<undefined>, bytes: Uint8Array): void;
  close(): void;
  error(s: Bun.Socket<undefined>, err: Error): void;
}

/** How long a connection opened ahead waits for its request before it is closed. */
export const SPARE_MS = 1000;

type Connect = (options: Bun.TCPSocketConnectOptions<undefined>) => Promise<Bun.Socket<undefined>>;

/**
 * A connection to llama-server opened as a chat arrives, for the chat's first request to take:
 * the connect and the wait for its `open` (~0.3 ms on the project's VM, an event-loop turn) then
 * run while the turn takes its session, lease and slot, not after (docs/performance.md, "The
 * connection opened ahead"). llama-server closes every streamed answer's connection, so a
 * connection is used once. It is only ever taken by a request to the same launch (its port and
 * its per-launch key), before anything was written on it; one that is refused, closed or not
 * taken within SPARE_MS is dropped, and the request connects as it always did. Until then it
 * holds one of llama-server's HTTP threads (it accepted it), so a launch opens one only for a
 * slot that is free for it (runtime/launch.ts `connectAhead`).
 */
export class SpareConnection {
  private socket: Bun.Socket<undefined> | undefined;
  private taker: { handlers: SocketHandlers; fresh: () => void } | undefined;
  private gone = false;
  private readonly timer: ReturnType<typeof setTimeout>;

  private onDone: () => void;
  private readonly alive: () => boolean;

  constructor(
    private readonly endpoint: LlamaEndpoint,
    options: {
      /** Runs once, when a request takes it or it is dropped: the launch counts its spares (runtime/launch.ts). */
      onDone?: () => void;
      /**
       * Whether the server still runs, asked as a request takes it: one that died after the
       * connection opened may not have had its close heard yet, and the request would then be
       * written to it and fail as a death mid-answer, where a fresh connect is refused and sent
       * again on the restarted server (agent/watched-completion.ts).
       */
      alive?: () => boolean;
      connect?: Connect;
      /** How long it waits for a request before it is dropped (SPARE_MS). */
      expireMs?: number;
    } = {},
  ) {
    this.onDone = options.onDone ?? (() => {});
    this.alive = options.alive ?? (() => true);
    const connect = options.connect ?? Bun.connect;
    const url = new URL(endpoint.baseUrl);
    this.timer = setTimeout(() => this.close(), options.expireMs ?? SPARE_MS);
    this.timer.unref?.();
    connect({
      hostname: url.hostname,
      port: Number(url.port || 80),
      socket: {
        open: (s) => {
          if (this.gone) return void s.end();
          this.socket = s;
          this.taker?.handlers.open(s);
        },
        drain: (s) => this.taker?.handlers.drain(s),
        // llama-server says nothing before a request: a byte here is not an answer to one.
        data: (s, bytes) => (this.taker ? this.taker.handlers.data(s, bytes) : this.close()),
        close: () => (this.taker && this.socket ? this.taker.handlers.close() : this.lost()),
        error: (s, err) => (this.taker && this.socket ? this.taker.handlers.error(s, err) : this.lost()),
      },
    }).catch(() => this.lost());
  }

  /**
   * Gives the connection to a request to `endpoint`: true once `handlers` have it (`open` runs
   * now, or when it opens); false, and nothing changes, when it is another server's, gone or
   * taken, and false (it is dropped) when its server no longer runs. Should it fail before it
   * opens, `fresh` (the request's own connect) runs instead.
   */
  take(endpoint: LlamaEndpoint, handlers: SocketHandlers, fresh: () => void): boolean {
    const same = endpoint.baseUrl === this.endpoint.baseUrl && endpoint.apiKey === this.endpoint.apiKey;
    if (this.taker || this.gone || !same) return false;
    if (!this.alive()) {
      this.close();
      return false;
    }
    clearTimeout(this.timer);
    this.taker = { handlers, fresh };
    this.done();
    if (this.socket) handlers.open(this.socket);
    return true;
  }

  /** Drops it unless a request took it (that request closes its own connection). */
  close(): void {
    clearTimeout(this.timer);
    if (this.taker || this.gone) return;
    this.gone = true;
    this.done();
    this.socket?.end();
  }

  /** Refused or closed: before a request took it, nothing more; after, before it opened, the request connects anew. */
  private lost(): void {
    clearTimeout(this.timer);
    const taker = this.taker;
    if (this.gone) return;
    this.gone = true;
    this.done();
    if (taker && !this.socket) taker.fresh();
  }

  private done(): void {
    const onDone = this.onDone;
    this.onDone = () => {};
    onDone();
  }
}
