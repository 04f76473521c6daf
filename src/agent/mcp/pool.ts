import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { McpServerConfig } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import { abortable } from "../../util/abortable.ts";
import type { StateCell } from "../../util/state-cell.ts";
import { MAX_TIMER_MS } from "../../util/timer-limit.ts";
import { CALLED, callOutcome, type McpCallOutcome } from "./call-result.ts";
import { type Connection, type StartOptions, type StartOutcome, startServer } from "./connect.ts";
import { type ServerState, serverCell } from "./server-state.ts";
import { commandLineOf, configSecrets, withoutSecrets } from "./stderr-tail.ts";
import type { McpToolInfo } from "./tool-list.ts";

/** How long a server that failed to start is left alone before a chat tries it again. */
export const RETRY_AFTER_MS = 30_000;

/** How long after a call's own timeout the SDK's fires, should the first fail to end it. */
const BACKSTOP_MS = 1000;

/** What a server may make the core hold or read before it is killed (tests set small ones). */
export type PoolLimits = Pick<StartOptions, "maxPendingBytes" | "unasked"> & {
  /** Test hook: a signal that ends a call to `tool` as its timeout_s would (no wait for the clock). */
  callClock?: (tool: string) => AbortSignal | undefined;
  /** Test hook: a signal that ends a listing's wait for a changed list as RELIST_WAIT_MS would. */
  relistClock?: () => AbortSignal | undefined;
};

/**
 * How long a listing (a turn's start) waits for a changed tool list's re-read (connect.ts
 * watchToolList) before it offers the tools read before: a server that said its list changed
 * and then hung held every turn's first request for its whole timeout_s. The read goes on
 * (within timeout_s), and a later listing gets what it read. A local server answers in
 * milliseconds; one behind a network proxy in well under this.
 */
export const RELIST_WAIT_MS = 2000;

/** What a listing that did not wait out the re-read says (the turn's `tools_unavailable` warning). */
const STALE = `its changed tool list was not read within ${RELIST_WAIT_MS / 1000} s (it is still being read); the tools read before were offered`;

/**
 * The configured MCP stdio servers, each started on first use and kept for the core's life
 * (the composition root closes the pool at shutdown, so no server outlives the core). A server
 * whose connection closed (crash, exit) is started again on its next use. Each server's life is
 * one state (server-state.ts), changed only by a guarded swap.
 */
export class McpPool {
  private readonly cells = new Map<string, StateCell<ServerState>>();
  /** Calls in flight on each connection: one that timed out is killed once none is left (draining). */
  private readonly inFlight = new Map<Connection, number>();
  private closing: Promise<void> | undefined;
  /** Each pending re-read's brief wait (briefWait): gone with the re-read. */
  private readonly briefWaits = new WeakMap<Promise<void>, Promise<boolean>>();

  constructor(
    private readonly servers: readonly McpServerConfig[],
    private readonly now: () => number = Date.now,
    /** Where servers' pid records go (none without). */
    private readonly dataDir?: string,
    private readonly limits: PoolLimits = {},
  ) {
    for (const s of servers) this.cells.set(s.name, serverCell(s.name));
  }

  config(name: string): McpServerConfig | undefined {
    return this.servers.find((s) => s.name === name);
  }

  async tools(server: string, signal: AbortSignal): Promise<McpToolInfo[]> {
    return (await this.listing(server, signal)).tools;
  }

  /** Its tools, and why some it listed were left out (tool-list.ts), or null. */
  async listing(
    server: string,
    signal: AbortSignal,
  ): Promise<Pick<Connection, "tools" | "dropped" | "unfit">> {
    const conn = await this.connection(server, signal, "list");
    // A list it said changed is read again (connect.ts), but a draining server is sent nothing.
    const s = this.cells.get(server)?.get();
    const reading = s?.kind === "ready" && s.conn === conn ? conn.refresh() : undefined;
    const stale = reading !== undefined && !(await abortable(this.briefWait(reading), signal));
    // Read after the wait: a re-read that came within it is the list offered.
    const { tools, dropped, unfit } = conn;
    return { tools, dropped: stale ? [dropped, STALE].filter(Boolean).join("; ") : dropped, unfit };
  }

  /**
   * One brief wait per re-read, shared by the listings that find it pending: one that finds it
   * already past the wait offers the old list at once. A wait per listing held every turn
   * RELIST_WAIT_MS again while a hung re-read lasted (up to timeout_s).
   */
  private briefWait(reading: Promise<void>): Promise<boolean> {
    let waited = this.briefWaits.get(reading);
    if (!waited) {
      waited = this.waitBriefly(reading);
      this.briefWaits.set(reading, waited);
    }
    return waited;
  }

  /** Whether `reading` settled within RELIST_WAIT_MS (or before the test's relistClock). */
  private async waitBriefly(reading: Promise<void>): Promise<boolean> {
    const wait = new AbortController();
    const timer = setTimeout(() => wait.abort(), RELIST_WAIT_MS);
    const hook = this.limits.relistClock?.();
    const bound = hook ? AbortSignal.any([wait.signal, hook]) : wait.signal;
    try {
      return await abortable(reading, bound).then(
        () => true,
        () => false,
      );
    } finally {
      clearTimeout(timer);
    }
  }

  async call(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<McpCallOutcome> {
    const cfg = this.requireConfig(server);
    const hook = this.limits.callClock?.(tool);
    // The wait for a draining server counts in the call's timeout_s (it waited up to the other
    // calls' timeout_s, then had its own in full); a start is bounded by startup_timeout_s.
    const waited = await this.drained(cfg, signal, hook);
    const conn = await this.connection(server, signal, "call");
    this.inFlight.set(conn, (this.inFlight.get(conn) ?? 0) + 1);
    const timeout = Math.max(1, cfg.timeout_s * 1000 - (waited ?? 0));
    // The call's own clock, not the SDK's: a server may answer with an error of the SDK's
    // RequestTimeout code itself (its upstream timed out), and was killed for it, failing every
    // other chat's call to it. The SDK's timeout is only a backstop behind this one.
    const clock = new AbortController();
    // Cleared at the call's end: a timer per call kept to timeout_s held every call's signals.
    const timer = setTimeout(() => clock.abort(), Math.min(timeout, MAX_TIMER_MS));
    if (hook?.aborted) clock.abort();
    hook?.addEventListener("abort", () => clock.abort(), { once: true });
    const result = await conn.client
      // Not callTool: its schema is the SDK's whole-result one (call-result.ts).
      .request({ method: "tools/call", params: { name: tool, arguments: args } }, CALLED, {
        signal: AbortSignal.any([signal, clock.signal]),
        // A timer longer than MAX_TIMER_MS fires at once: the longest timeout_s allowed is near it.
        timeout: Math.min(timeout + BACKSTOP_MS, MAX_TIMER_MS),
      })
      .catch((err: unknown) => {
        // A server that outlasted timeout_s is hung or still busy (flooding, say) despite the
        // cancel the SDK sent: it is killed and started afresh on next use (docs/agent.md), once
        // the other calls in flight on it have settled.
        if (!signal.aborted && clock.signal.aborted) {
          // Only a server that had the whole timeout_s is hung: one that had what a drain left may be slow.
          if (waited === undefined)
            this.condemn(server, conn, `a call to '${tool}' outlasted timeout_s (${cfg.timeout_s} s)`);
          throw new McpError(ErrorCode.RequestTimeout, "Request timed out", { timeout });
        }
        // Killed by the core (a flood, a stdin that stopped draining), or exited on its own: the
        // call's result says why, not only "Connection closed".
        if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
          const why = conn.stoppedFor();
          if (why) throw new McpError(err.code, `MCP server '${server}' was stopped: ${why}`);
          const exit = conn.exitedAs();
          if (exit) throw new McpError(err.code, `MCP server '${server}' ${exit}`);
        }
        if (err instanceof Error)
          err.message = withoutSecrets(err.message, configSecrets(cfg.env, commandLineOf(cfg)));
        throw err;
      })
      // A call may have launched something outside the server's group (a browser): the guard hears of it.
      .finally(() => {
        clearTimeout(timer);
        conn.noteEscaped();
        this.settled(server, conn);
      });
    // A failing tool quotes what it was given as a client library does ("401 … for url:
    // https://…?api_key=…"): the model, the history and the host get its error without the
    // config's secrets, as a failed start's (stderr-tail.ts). A result that succeeded is the
    // tool's own text, left whole: an env value may be a path it rightly names.
    const outcome = callOutcome(result);
    if (!outcome.isError) return outcome;
    return { ...outcome, text: withoutSecrets(outcome.text, configSecrets(cfg.env, commandLineOf(cfg))) };
  }

  /**
   * Waits while `cfg`'s server drains (a call to it timed out beside others), within the call's
   * own timeout_s (or until `hook` aborts, as that clock would); returns the milliseconds waited,
   * undefined when it did not wait. Running out is the call's timeout, sent to no server: none
   * was asked, none is killed.
   */
  private async drained(
    cfg: McpServerConfig,
    signal: AbortSignal,
    hook?: AbortSignal,
  ): Promise<number | undefined> {
    const cell = this.cells.get(cfg.name) as StateCell<ServerState>;
    if (cell.get().kind !== "draining") return undefined;
    const began = performance.now();
    const clock = new AbortController();
    const timer = setTimeout(() => clock.abort(), Math.min(cfg.timeout_s * 1000, MAX_TIMER_MS));
    const bound = AbortSignal.any([signal, clock.signal, ...(hook ? [hook] : [])]);
    try {
      for (let s = cell.get(); s.kind === "draining"; s = cell.get()) await abortable(s.gone.promise, bound);
    } catch (err) {
      if (signal.aborted) throw err;
      const why = `MCP server '${cfg.name}' was still being stopped after a call outlasted timeout_s when this call's own timeout_s (${cfg.timeout_s} s) ran out; the call was not sent`;
      throw new McpError(ErrorCode.RequestTimeout, why, { timeout: cfg.timeout_s * 1000 });
    } finally {
      clearTimeout(timer);
    }
    return performance.now() - began;
  }

  /**
   * A call to `conn` timed out: killed now if no other call is in flight on it, else once they
   * have settled (draining). Killing it at once failed every other chat's call to it, though a
   * server busy with one call (a slow fetch that ignores the cancel) may answer the rest.
   */
  private condemn(server: string, conn: Connection, why: string): void {
    const cell = this.cells.get(server) as StateCell<ServerState>;
    const s = cell.get();
    if (s.kind === "draining" && s.conn === conn) return;
    if ((this.inFlight.get(conn) ?? 0) > 1 && s.kind === "ready" && s.conn === conn)
      cell.swap(s, { kind: "draining", conn, why, gone: Promise.withResolvers() });
    else conn.kill(why);
  }

  /** A call on `conn` ended: the last one on a draining server kills it. */
  private settled(server: string, conn: Connection): void {
    const left = (this.inFlight.get(conn) ?? 1) - 1;
    if (left > 0) {
      this.inFlight.set(conn, left);
      return;
    }
    this.inFlight.delete(conn);
    const s = this.cells.get(server)?.get();
    if (s?.kind === "draining" && s.conn === conn) conn.kill(s.why);
  }

  /** Every server to `closed`: starts are killed, running servers stopped; resolves once all are gone. */
  close(): Promise<void> {
    this.closing ??= Promise.all(
      [...this.cells.values()].map((cell) => {
        const s = cell.get();
        cell.swap(s, { kind: "closed" });
        // A call waiting for a draining server sees the pool closing.
        if (s.kind === "draining") s.gone.resolve();
        return settle(s);
      }),
    ).then(() => {});
    return this.closing;
  }

  private requireConfig(server: string): McpServerConfig {
    const cfg = this.config(server);
    if (!cfg)
      throw new CoreError("invalid_request", `no MCP server named '${server}' in the config`, {
        field: "agents.tools",
      });
    return cfg;
  }

  /** A server's connection, started if need be; a call waits for a draining one to go (a listing reads its tools). */
  private async connection(server: string, signal: AbortSignal, use: "list" | "call"): Promise<Connection> {
    if (this.closing) throw shuttingDown();
    // A turn cancelled before its listing (its tools are listed together, after memory recall)
    // started every server it named, for no one; a start that failed was a rejection unheard.
    signal.throwIfAborted();
    const cfg = this.requireConfig(server);
    const cell = this.cells.get(cfg.name) as StateCell<ServerState>;
    const s = cell.get();
    if (s.kind === "closed") throw shuttingDown();
    if (s.kind === "ready" || (s.kind === "draining" && use === "list")) return s.conn;
    if (s.kind === "draining") {
      await abortable(s.gone.promise, signal);
      return this.connection(server, signal, use);
    }
    // A server that just failed to start (a hang costs startup_timeout_s) is not retried by
    // every chat: for a while each one gets the same failure at once.
    if (s.kind === "failed" && this.now() - s.at < RETRY_AFTER_MS) throw s.error;
    const starting = s.kind === "starting" ? s : this.start(cell, s, cfg);
    // A cancelled chat stops waiting for a slow start; the start itself is bounded by
    // startup_timeout_s and its server killed if it does not make it.
    return abortable(starting.outcome.then(connectionOf), signal);
  }

  private start(cell: StateCell<ServerState>, from: ServerState, cfg: McpServerConfig): StartingState {
    const outcome = Promise.withResolvers<StartOutcome>();
    const state: StartingState = { kind: "starting", abort: new AbortController(), outcome: outcome.promise };
    cell.swap(from, state);
    outcome.resolve(
      startServer(cfg, {
        dataDir: this.dataDir,
        signal: state.abort.signal,
        ...this.limits,
        onClose: (conn) => {
          const now = cell.get();
          if ((now.kind === "ready" || now.kind === "draining") && now.conn === conn)
            cell.swap(now, { kind: "idle" });
          if (now.kind === "draining" && now.conn === conn) now.gone.resolve();
        },
      }),
    );
    void state.outcome.then((o) => {
      // Lost to close(), which settles this start itself.
      if (cell.get() !== state) return;
      if (o.ok) cell.swap(state, { kind: "ready", conn: o.conn });
      else cell.swap(state, { kind: "failed", at: this.now(), error: o.error, stopped: o.stopped });
    });
    return state;
  }
}

type StartingState = Extract<ServerState, { kind: "starting" }>;

function connectionOf(o: StartOutcome): Connection {
  if (!o.ok) throw o.error;
  return o.conn;
}

function shuttingDown(): CoreError {
  return new CoreError("cancelled", "the core is shutting down");
}

/** What close() waits for in the state it left: a start killed, a server stopped, a kill done. */
async function settle(s: ServerState): Promise<void> {
  if (s.kind === "ready" || s.kind === "draining") return s.conn.close().catch(() => {});
  if (s.kind === "failed") return s.stopped;
  if (s.kind !== "starting") return;
  s.abort.abort();
  const o = await s.outcome;
  // A start that made it just as the pool closed is stopped like any running server.
  await (o.ok ? o.conn.close().catch(() => {}) : o.stopped);
}
