import { lookup as dnsLookup } from "node:dns";
import type { LookupFunction } from "node:net";
import { connect, isIP, type Socket } from "node:net";
import type { Endpoint } from "../config/rpc-endpoint.ts";
import { localListener } from "./local-listener.ts";
import {
  type DeviceMemory,
  type QueryOptions,
  type RpcVersion,
  versionText,
  type WireFailure,
  type WorkerFailureKind,
  WorkerQuery,
} from "./wire.ts";

/**
 * The TCP edge of the worker query: one connection per worker, one deadline for the whole
 * exchange (connect included), closed as soon as the answer is in. Never throws: every
 * outcome is a `WorkerReport`. The protocol itself is `WorkerQuery` (wire.ts).
 */

/** A worker's answer is a few dozen bytes: anything slower than this is not a usable worker. */
export const QUERY_TIMEOUT_MS = 2000;

export type WorkerReport =
  | {
      endpoint: string;
      ok: true;
      version: RpcVersion;
      devices: DeviceMemory[];
      ms: number;
      /** The address the query reached (`ip:port`): one worker listed under two names shares it. */
      address?: string;
      /** The listening socket it reached when that is on this machine (local-listener.ts). */
      listener?: string;
      /** Not asked now: the running llama-server holds it; this is its last answer. */
      in_use?: true;
    }
  | {
      endpoint: string;
      ok: false;
      failure: WorkerFailureKind;
      message: string;
      version?: RpcVersion;
      ms: number;
    };

export interface QueryRequest extends QueryOptions {
  timeoutMs?: number;
  /** The resolver (tests replace it); the system's when absent. */
  lookup?: LookupFunction;
}

/**
 * A connection to the worker as llama-server makes it (ggml-rpc's socket_t::connect): IPv4
 * only, to the first address the name resolves to, no other tried. Trying every address (the
 * runtime's default) could reach a worker, or another machine, that llama-server will not.
 */
function connectLikeLlama(target: Endpoint, lookup?: LookupFunction): Socket {
  return connect({ host: target.host, port: target.port, family: 4, ...(lookup ? { lookup } : {}) });
}

export function queryWorker(target: Endpoint, request: QueryRequest = {}): Promise<WorkerReport> {
  const timeoutMs = request.timeoutMs ?? QUERY_TIMEOUT_MS;
  const t0 = performance.now();
  const query = new WorkerQuery(request);
  return new Promise((resolve) => {
    let settled = false;
    let connected = false;
    let address: string | undefined;
    let listener: Promise<string | undefined> | undefined;
    const name = new Resolution(target, request.lookup);
    const socket = connectLikeLlama(target, name.lookup);
    name.watch(socket);
    const finish = (outcome: { answer: { version: RpcVersion; devices: DeviceMemory[] } } | WireFailure) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const ms = Math.round(performance.now() - t0);
      if ("answer" in outcome) {
        // Its listener, read off the loop meanwhile (local-listener.ts).
        void (listener ?? Promise.resolve(undefined)).then((l) =>
          resolve({
            endpoint: target.endpoint,
            ok: true,
            ...outcome.answer,
            ms,
            ...(address ? { address } : {}),
            ...(l ? { listener: l } : {}),
          }),
        );
      } else {
        resolve({
          endpoint: target.endpoint,
          ok: false,
          failure: outcome.kind,
          message: outcome.message,
          ...versionOf(outcome),
          ms,
        });
      }
    };
    // A name without an IPv4 address, while it is asked for its others: the close that follows
    // the error must not answer first, nor the deadline say anything but this.
    let told: WireFailure | undefined;
    const timer = setTimeout(
      () => finish(told ?? deadlineFailure(connected, name.resolved, timeoutMs, query)),
      timeoutMs,
    );
    socket.setNoDelay(true);
    socket.on("connect", () => {
      connected = true;
      address = addressOf(socket);
      if (socket.remoteAddress && socket.remotePort !== undefined)
        listener = localListener(socket.remoteAddress.replace(/^::ffff:/, ""), socket.remotePort);
      socket.write(query.first());
    });
    socket.on("data", (chunk: Buffer) => {
      const step = query.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.length));
      if ("send" in step) socket.write(step.send);
      else if ("done" in step) finish({ answer: step.done });
      else if ("fail" in step) finish(step.fail);
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      const failure = connected ? query.closed() : connectFailure(err);
      if (failure.kind !== "unresolved" || isIP(target.host) !== 0) return finish(failure);
      told = failure;
      void ipv6Only(target.host, request.lookup).then((six) => finish(six ? noIpv4(six) : failure));
    });
    socket.on("close", () => {
      if (!told) finish(query.closed());
    });
  });
}

/** What the deadline met: the name server, the machine, or the worker itself. */
function deadlineFailure(
  connected: boolean,
  resolved: boolean,
  timeoutMs: number,
  query: WorkerQuery,
): WireFailure {
  if (!resolved)
    return {
      kind: "unresolved",
      message: `the host name did not resolve within ${timeoutMs} ms (its name server is slow or does not answer)`,
    };
  const version = query.answeredVersion();
  // A worker busy with another client answers nothing: one that answered HELLO began, then froze.
  if (version)
    return {
      kind: "timeout",
      message: `answered HELLO (RPC v${versionText(version)}) but stopped answering ${query.asking()} within ${timeoutMs} ms (frozen or cut off in the middle of the query, or not a ggml-rpc-server)`,
      version,
    };
  return {
    kind: "timeout",
    message: connected
      ? `accepted the connection but did not answer within ${timeoutMs} ms (a worker serves one client at a time: is another llama-server using it? or this port is not a ggml-rpc-server)`
      : `did not accept a connection within ${timeoutMs} ms (machine off, or a firewall dropping the port)`,
  };
}

/**
 * Whether the worker's name has an address yet, as its socket reports (`lookup`), or the
 * resolver a test gives answers: a deadline met before it is the name server's, not the machine's.
 */
class Resolution {
  resolved: boolean;
  readonly lookup: LookupFunction | undefined;

  constructor(target: Endpoint, given?: LookupFunction) {
    this.resolved = isIP(target.host) !== 0;
    this.lookup =
      given &&
      ((host, options, callback) =>
        given(host, options, (...answer: Parameters<typeof callback>) => {
          this.resolved = true;
          callback(...answer);
        }));
  }

  watch(socket: Socket): void {
    socket.on("lookup", () => {
      this.resolved = true;
    });
  }
}

/** `ip:port` of the peer, an IPv4-mapped IPv6 address as IPv4; undefined if the socket has none. */
function addressOf(socket: Socket): string | undefined {
  const ip = socket.remoteAddress?.replace(/^::ffff:(?=\d+\.)/, "");
  if (!ip || socket.remotePort === undefined) return undefined;
  return ip.includes(":") ? `[${ip}]:${socket.remotePort}` : `${ip}:${socket.remotePort}`;
}

function versionOf(f: WireFailure): { version?: RpcVersion } {
  return f.version ? { version: f.version } : {};
}

/**
 * The first address of a name that has no IPv4 one, when it has IPv6 ones: such a name resolves
 * (ping reaches it), but llama-server connects to workers over IPv4 only (gethostbyname), so
 * "does not resolve, use its IP address" sent the user to an IPv6 literal, refused as well.
 */
function ipv6Only(host: string, given?: LookupFunction): Promise<string | undefined> {
  return new Promise((resolve) => {
    try {
      (given ?? dnsLookup)(host, { all: true }, (err, found) => {
        const list = Array.isArray(found) ? found : [];
        resolve(err ? undefined : list.find((a) => a.family === 6)?.address);
      });
    } catch {
      resolve(undefined);
    }
  });
}

function noIpv4(six: string): WireFailure {
  return {
    kind: "unresolved",
    message: `the host name has no IPv4 address, only IPv6 (${six}), and llama-server connects to workers over IPv4 only`,
  };
}

function connectFailure(err: NodeJS.ErrnoException): WireFailure {
  switch (err.code) {
    case "ECONNREFUSED":
      return { kind: "refused", message: "connection refused (no ggml-rpc-server listening on that port)" };
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_NONAME":
      return { kind: "unresolved", message: "the host name does not resolve" };
    case "ETIMEDOUT":
      return { kind: "timeout", message: "the connection timed out" };
    default:
      return { kind: "unreachable", message: `cannot connect (${err.code ?? err.message})` };
  }
}

/**
 * Whether anything still accepts a TCP connection at the endpoint, without speaking to it:
 * used while llama-server is dying, when the workers that are alive are still its clients
 * (a worker serves one client at a time) and would not answer a query yet. Undefined when its
 * name did not resolve (a lookup error, or the deadline met before an address): a name server's
 * hiccup says nothing of the worker, which llama-server reached by that name moments before.
 */
export function acceptsConnections(
  target: Endpoint,
  timeoutMs: number,
  lookup?: LookupFunction,
): Promise<boolean | undefined> {
  return new Promise((resolve) => {
    const name = new Resolution(target, lookup);
    const socket = connectLikeLlama(target, name.lookup);
    name.watch(socket);
    const done = (up: boolean | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(up);
    };
    const timer = setTimeout(() => done(name.resolved ? false : undefined), timeoutMs);
    socket.on("connect", () => done(true));
    socket.on("error", (err: NodeJS.ErrnoException) =>
      done(connectFailure(err).kind === "unresolved" ? undefined : false),
    );
  });
}
