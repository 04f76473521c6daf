import { parseEndpoint } from "../config/rpc-endpoint.ts";
import { CoreError } from "../protocol/errors.ts";
import { acceptsConnections } from "../rpc/client.ts";
import { type WorkerBook, workerBook } from "../rpc/workers.ts";
import { logger } from "../util/logger.ts";

/**
 * The supervisor's eye on the RPC workers of the llama-server it runs (docs/distributed.md).
 * llama-server itself says little (test/fixtures/llama-server/transcripts/82, 83): an unreachable
 * worker is skipped at start-up with one `E Failed to connect to host:port` line (b10587; newer
 * builds abort instead), and a worker that dies mid-run aborts the whole server on the next request
 * with `Remote RPC server crashed or returned malformed response`, naming no worker. This reads the
 * log lines for those signatures and finds which worker is gone by trying to connect to each (the
 * live ones still hold llama-server's connection and would not answer a query, but they accept a
 * connection). Its findings go to the worker book, which `status` reads.
 */

export const RPC_ABORT = /Remote RPC server crashed or returned malformed response/;
const FAILED_CONNECT = /Failed to connect to ([^\s:,]+:\d+)\s*$/;
const HANDSHAKE_FAILED = /RPC handshake failed for (\S+)/;
const VERSION_MISMATCH = /RPC server version mismatch: (\d+\.\d+\.\d+)/;

/** How long finding the lost worker may take: it must beat the dying process to the chat. */
export const IDENTIFY_TIMEOUT_MS = 1000;

export interface RpcWatchOptions {
  /** The supervisor's reaction to a lost worker while the server is ready (restart, tell the chat). */
  onLost: (err: CoreError) => void;
  book?: WorkerBook;
  /**
   * Whether something still accepts connections at `host:port`, undefined when that could not be
   * told (its name did not resolve); tests replace it.
   */
  accepts?: (endpoint: string, timeoutMs: number) => Promise<boolean | undefined>;
}

export class RpcWatch {
  private endpoints: readonly string[] = [];
  private server: string | undefined;
  private pendingVersion: string | null = null;
  private identifying: Promise<CoreError> | undefined;
  private identified: CoreError | undefined;
  /**
   * Workers this launch's llama-server said it could not connect to, with why, as the lines
   * came: with -v the load prints hundreds of lines after, past the launch tail.
   */
  private readonly skipped = new Map<string, string>();
  /** Which launch: a finding that arrives after the next launch began is not this one's. */
  private generation = 0;
  private readonly book: WorkerBook;
  private readonly accepts: (endpoint: string, timeoutMs: number) => Promise<boolean | undefined>;

  constructor(private readonly options: RpcWatchOptions) {
    this.book = options.book ?? workerBook;
    this.accepts = options.accepts ?? defaultAccepts;
  }

  /**
   * A launch with these workers (`--rpc`) begins: they are llama-server's from now on. `server`:
   * its binary, which a version refusal is recorded against.
   */
  begin(endpoints: readonly string[], server?: string): void {
    this.generation++;
    this.endpoints = endpoints;
    this.server = server;
    this.pendingVersion = null;
    this.identifying = undefined;
    this.identified = undefined;
    this.skipped.clear();
    this.book.launched(endpoints, this);
  }

  /**
   * A spawn of this launch begins: the one before (a port it could not bind, then another) said
   * its `Failed to connect` before it bound; its workers may all answer this one.
   */
  spawning(): void {
    this.skipped.clear();
    this.pendingVersion = null;
  }

  /** Which launch began last (`begin`): an exit names its own, to `ended`. */
  launchId(): number {
    return this.generation;
  }

  /**
   * The launch's server is gone (stopped, crashed, failed to start): the workers are free. With
   * `launch` (`launchId` when it became ready), only while no later launch began: a server whose
   * exit is seen after its stop gave up waiting must not free the next one's workers.
   */
  ended(launch?: number): void {
    if (launch !== undefined && launch !== this.generation) return;
    this.book.released(this);
  }

  /** Every line llama-server prints. */
  line(text: string): void {
    if (this.endpoints.length === 0) return;
    const version = VERSION_MISMATCH.exec(text);
    if (version) this.pendingVersion = version[1] as string;
    const failed = FAILED_CONNECT.exec(text)?.[1];
    if (failed && this.endpoints.includes(failed)) this.skipped.set(failed, skipReason(this.pendingVersion));
    const refused = HANDSHAKE_FAILED.exec(text) ?? (this.pendingVersion ? FAILED_CONNECT.exec(text) : null);
    if (refused) {
      this.book.refuseVersion(refused[1] as string, this.pendingVersion, this.server);
      // The mismatch is the next worker's only: one unreachable after it was not refused.
      this.pendingVersion = null;
    }
    if (RPC_ABORT.test(text) && !this.identifying) {
      const generation = this.generation;
      this.identifying = this.identify();
      void this.identifying.then((err) => {
        if (generation !== this.generation) return;
        this.identified = err;
        this.options.onLost(err);
      });
    }
  }

  /**
   * After a start that looked good: a worker llama-server skipped (b10587 logs it and carries
   * on, CPU only) is a failed start, named, so the next one plans without it.
   */
  afterReady(launchTail: readonly string[]): CoreError | null {
    const skipped = new Map(this.skipped);
    let version: string | null = null;
    for (const l of launchTail) {
      const v = VERSION_MISMATCH.exec(l);
      if (v) version = v[1] as string;
      const m = FAILED_CONNECT.exec(l);
      if (!m) continue;
      if (this.endpoints.includes(m[1] as string)) skipped.set(m[1] as string, skipReason(version));
      // A mismatch line comes just before its worker's `Failed to connect`, and is that one's only.
      version = null;
    }
    if (skipped.size === 0) return null;
    for (const e of skipped.keys())
      this.book.lost(e, `llama-server skipped it at start-up: ${skipped.get(e)}`);
    const list = [...skipped].map(([e, why]) => `${e} (${why})`).join(", ");
    return new CoreError(
      "internal_error",
      `llama-server started without RPC worker ${list}, after it answered the check just before; it was stopped rather than left running on less memory; the next start plans without it`,
      { rpc_workers_lost: [...skipped.keys()], log_tail: launchTail.slice(-20) },
    );
  }

  /**
   * A failed start while llama-server had workers. One that stalled (startupOverdue's "did not
   * become ready") names them, since a frozen one stalls the load without a word. One that
   * crashed (an exit, internal_error) names the workers that no longer accept connections:
   * killed mid-load, the real build died of SIGSEGV with no RPC line in its log. Any other
   * failure, or a launch without workers, passes unchanged.
   */
  async startFailure(err: CoreError): Promise<CoreError> {
    if (this.endpoints.length === 0) return err;
    if (err.message.startsWith(NOT_READY)) {
      return new CoreError(err.code, `${err.message}${frozenWorkerNote(this.endpoints)}`, {
        ...err.data,
        rpc_workers: [...this.endpoints],
      });
    }
    const exited = err.data !== undefined && ("signal" in err.data || "exit_code" in err.data);
    if (err.code !== "internal_error" || !exited) return err;
    const lost = await this.unreachable();
    if (lost.length === 0) return err;
    for (const e of lost) this.book.lost(e, "stopped accepting connections while llama-server started on it");
    return new CoreError(
      err.code,
      `${err.message}; RPC worker ${lost.join(", ")} stopped accepting connections during the start, the likely cause; the next start plans without ${lost.length === 1 ? "it" : "them"}`,
      { ...err.data, rpc_workers_lost: lost, rpc_workers: [...this.endpoints] },
    );
  }

  /**
   * The launch's workers that no longer accept a connection. One whose name did not resolve just
   * then is not among them: a lost one is left out of the next start, and a name server's
   * hiccup (EAI_AGAIN) left out a live worker.
   */
  private async unreachable(): Promise<string[]> {
    const up = await Promise.all(this.endpoints.map((e) => this.accepts(e, IDENTIFY_TIMEOUT_MS)));
    return this.endpoints.filter((_, i) => up[i] === false);
  }

  /** An exit of the ready server: the named error when it was the RPC abort, else null. */
  crashError(how: string, data: Record<string, unknown>, tail: readonly string[]): CoreError | null {
    if (this.identified) return withData(this.identified, data);
    if (!this.identifying && !tail.some((l) => RPC_ABORT.test(l))) return null;
    // The process died before the connections were tried: name the workers it had.
    return new CoreError(
      "internal_error",
      `llama-server aborted (${how}): one of its RPC workers (${this.endpoints.join(", ")}) stopped answering (Remote RPC server crashed or returned malformed response); the next start checks them and plans without any that is gone`,
      { ...data, rpc_workers: [...this.endpoints] },
    );
  }

  /**
   * The crash's error once the lost worker is named: llama-server exits ms after its abort line
   * (GGML_NO_BACKTRACE, child-env.ts), before the connections are tried, so an identification
   * under way is waited for (bounded by IDENTIFY_TIMEOUT_MS); else `err` as it is.
   */
  async named(err: CoreError): Promise<CoreError> {
    const pending = this.identifying;
    if (!pending || this.identified) return err;
    const found = await Promise.race([pending, Bun.sleep(IDENTIFY_TIMEOUT_MS + 100).then(() => undefined)]);
    return found ? withData(found, err.data ?? {}) : err;
  }

  private async identify(): Promise<CoreError> {
    const lost = await this.unreachable();
    for (const e of lost)
      this.book.lost(e, "stopped answering while llama-server used it; llama-server aborted");
    logger.error(`llama-server lost RPC worker(s): ${lost.join(", ") || "(none refuses connections now)"}`);
    const what =
      lost.length === 0
        ? `an RPC worker stopped answering (none of ${this.endpoints.join(", ")} refuses connections now)`
        : `RPC worker ${lost.join(", ")} stopped answering`;
    return new CoreError(
      "internal_error",
      `llama-server aborted: ${what} (Remote RPC server crashed or returned malformed response); the next start plans without ${lost.length === 1 ? "it" : "any that is gone"}`,
      { rpc_workers_lost: lost, rpc_workers: [...this.endpoints] },
    );
  }
}

/** How startupOverdue's errors begin (launch-steps.ts). */
const NOT_READY = "llama-server did not become ready:";

/**
 * What a stall says when llama-server had RPC workers: a worker that stopped without closing
 * its connection (a frozen process, a machine asleep, a pulled cable) is waited on forever by
 * llama-server, which names no worker (docs/distributed.md "While it runs").
 */
export function frozenWorkerNote(endpoints: readonly string[]): string {
  if (endpoints.length === 0) return "";
  const which = `RPC worker${endpoints.length > 1 ? "s" : ""} ${endpoints.join(", ")}`;
  return `; it was using ${which}: a worker that stops without closing its connection (frozen, its machine asleep or cut off) stalls llama-server like this; the next start checks them and plans without one that does not answer`;
}

function skipReason(refusedVersion: string | null): string {
  return refusedVersion
    ? `it speaks RPC protocol v${refusedVersion}, which this llama-server refuses`
    : "it could not connect";
}

function withData(err: CoreError, data: Record<string, unknown>): CoreError {
  return new CoreError(err.code, err.message, { ...err.data, ...data });
}

function defaultAccepts(endpoint: string, timeoutMs: number): Promise<boolean | undefined> {
  const target = parseEndpoint(endpoint);
  return target.ok ? acceptsConnections(target, timeoutMs) : Promise.resolve(false);
}
