import { RPC_WORKER_FAILURES } from "../protocol/rpc-workers.ts";
/**
 * The little of llama.cpp's RPC protocol that asks a worker what it has, without llama-server
 * (test/fixtures/llama-server/transcripts/87-rpc-wire.txt): a request is `cmd (u8) | size (u64 LE)
 * | payload`, a reply `size (u64 LE) | payload`; HELLO must come first. Pure: `WorkerQuery` is fed
 * the bytes that arrive and says what to send next, so every hostile answer (garbage, a huge size,
 * too many bytes, another protocol) is a unit test. Nothing is ever allocated from a size the peer
 * sends: each reply has a size fixed by the protocol, and anything else fails.
 */

export const CMD_GET_DEVICE_MEMORY = 11;
export const CMD_HELLO = 14;
export const CMD_DEVICE_COUNT = 15;

/** HELLO's request: connection capabilities, all zero for plain TCP. */
export const HELLO_REQUEST_BYTES = 24;
/** HELLO's reply: major, minor, patch, a padding byte, the server's 24 capability bytes. */
export const HELLO_REPLY_BYTES = 28;
const DEVICE_COUNT_REPLY_BYTES = 4;
const DEVICE_MEMORY_REPLY_BYTES = 16;
/** llama.cpp's device limit; a worker claiming more is not telling the truth. */
export const MAX_DEVICES = 16;
/**
 * More memory than any one device has (1 PiB; a large server's RAM is a few TiB): a worker
 * reporting it (2^64 - 1 from garbage) would be handed every layer, and past 2^53 the number
 * is not even exact.
 */
export const MAX_DEVICE_BYTES = 2 ** 50;

export interface RpcVersion {
  major: number;
  minor: number;
  patch: number;
}

export interface DeviceMemory {
  free_bytes: number;
  total_bytes: number;
}

/** What a worker answered, in full. */
export interface WorkerAnswer {
  version: RpcVersion;
  devices: DeviceMemory[];
}

/**
 * Why a worker could not be used. The network kinds come from the TCP edge; the protocol
 * kinds from here: `wrong_version` (it speaks another RPC protocol), `malformed` (garbage, a
 * size no reply of ours has, an HTTP server…), `closed` (it hung up before answering).
 */
/** Every way the worker query can fail; the plan, the worker book and status list them as they are. */
export const WORKER_FAILURE_KINDS = RPC_WORKER_FAILURES;
export type WorkerFailureKind = (typeof WORKER_FAILURE_KINDS)[number];

export interface WireFailure {
  kind: WorkerFailureKind;
  message: string;
  /** Known once HELLO was answered. */
  version?: RpcVersion;
}

export type QueryStep =
  | { send: Uint8Array }
  | { done: WorkerAnswer }
  | { fail: WireFailure }
  | { wait: true };

export function versionText(v: RpcVersion): string {
  return `${v.major}.${v.minor}.${v.patch}`;
}

/** One request: command byte, payload size (u64 LE), payload. */
export function encodeRequest(cmd: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(9 + payload.length);
  const view = new DataView(out.buffer);
  out[0] = cmd;
  view.setBigUint64(1, BigInt(payload.length), true);
  out.set(payload, 9);
  return out;
}

export function helloRequest(): Uint8Array {
  return encodeRequest(CMD_HELLO, new Uint8Array(HELLO_REQUEST_BYTES));
}

export function deviceCountRequest(): Uint8Array {
  return encodeRequest(CMD_DEVICE_COUNT);
}

export function deviceMemoryRequest(device: number): Uint8Array {
  const payload = new Uint8Array(4);
  new DataView(payload.buffer).setUint32(0, device, true);
  return encodeRequest(CMD_GET_DEVICE_MEMORY, payload);
}

/** What was being asked, for the messages. */
type Stage = { ask: "hello" } | { ask: "count" } | { ask: "memory"; device: number };

const REPLY_BYTES = {
  hello: HELLO_REPLY_BYTES,
  count: DEVICE_COUNT_REPLY_BYTES,
  memory: DEVICE_MEMORY_REPLY_BYTES,
};
const ASKED = { hello: "HELLO", count: "DEVICE_COUNT", memory: "GET_DEVICE_MEMORY" };

export interface QueryOptions {
  /**
   * The RPC major version the caller needs (the one llama-server speaks), when known: a worker
   * answering another is `wrong_version` at once, before any other question.
   */
  expectMajor?: number;
}

/**
 * The question-and-answer with one worker: `first()` is HELLO; each `push` of received bytes
 * answers `wait` (need more), `send` (the next request), `done` or `fail`. Once done or
 * failed it stays so.
 */
export class WorkerQuery {
  private stage: Stage = { ask: "hello" };
  /** The reply being read: 8 bytes of size, then exactly the expected payload. */
  private buffer = new Uint8Array(8 + HELLO_REPLY_BYTES);
  private filled = 0;
  private version: RpcVersion | undefined;
  private count = 0;
  private readonly devices: DeviceMemory[] = [];
  private finished: QueryStep | undefined;

  constructor(private readonly options: QueryOptions = {}) {}

  first(): Uint8Array {
    return helloRequest();
  }

  /** The request whose reply is awaited (`HELLO`, `DEVICE_COUNT`, `GET_DEVICE_MEMORY`). */
  asking(): string {
    return ASKED[this.stage.ask];
  }

  /** HELLO was answered with this version: known even when the query then fails. */
  answeredVersion(): RpcVersion | undefined {
    return this.version;
  }

  push(chunk: Uint8Array): QueryStep {
    if (this.finished) return this.finished;
    let offset = 0;
    while (offset < chunk.length) {
      const expected = REPLY_BYTES[this.stage.ask];
      const want = 8 + expected - this.filled;
      const take = Math.min(want, chunk.length - offset);
      this.buffer.set(chunk.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled >= 8 && this.filled - take < 8) {
        const bad = this.checkSize(expected);
        if (bad) return this.finish({ fail: bad });
      }
      if (this.filled < 8 + expected) return { wait: true };
      // A reply is complete; bytes beyond it were never asked for.
      if (offset < chunk.length) return this.finish({ fail: this.extraBytes() });
      return this.complete();
    }
    return { wait: true };
  }

  /** The peer closed the connection (or reset it) before the query finished. */
  closed(): WireFailure {
    const asked = ASKED[this.stage.ask];
    const message =
      this.stage.ask === "hello"
        ? this.filled === 0
          ? "closed the connection without answering HELLO (an older ggml-rpc-server, or not an RPC worker)"
          : `closed the connection in the middle of its HELLO reply`
        : `closed the connection before answering ${asked}`;
    return { kind: "closed", message, ...(this.version ? { version: this.version } : {}) };
  }

  private finish(step: QueryStep): QueryStep {
    this.finished = step;
    return step;
  }

  /** The reply's size field, checked against the protocol's before a payload byte is kept. */
  private checkSize(expected: number): WireFailure | null {
    const head = this.buffer.subarray(0, 8);
    const size = new DataView(head.buffer, head.byteOffset, 8).getBigUint64(0, true);
    if (size === BigInt(expected)) return null;
    const asked = ASKED[this.stage.ask];
    const text = new TextDecoder().decode(head);
    if (text.startsWith("HTTP/"))
      return { kind: "malformed", message: `answered ${asked} like an HTTP server, not an RPC worker` };
    if (this.stage.ask === "hello" && size < 64n) {
      return {
        kind: "wrong_version",
        message: `answered HELLO with ${size} bytes where RPC protocol v5 and later send ${expected}: another llama.cpp version`,
      };
    }
    return {
      kind: "malformed",
      message: `answered ${asked} with a size field of ${size} bytes where ${expected} were expected (not an RPC worker, or garbage)`,
    };
  }

  private extraBytes(): WireFailure {
    return {
      kind: "malformed",
      message: `sent more bytes than its ${ASKED[this.stage.ask]} reply holds (not an RPC worker, or garbage)`,
    };
  }

  private payload(): DataView {
    return new DataView(this.buffer.buffer, this.buffer.byteOffset + 8, REPLY_BYTES[this.stage.ask]);
  }

  private next(stage: Stage): QueryStep {
    this.stage = stage;
    this.filled = 0;
    return {
      send:
        stage.ask === "count"
          ? deviceCountRequest()
          : deviceMemoryRequest((stage as { device: number }).device),
    };
  }

  private complete(): QueryStep {
    const p = this.payload();
    switch (this.stage.ask) {
      case "hello": {
        this.version = { major: p.getUint8(0), minor: p.getUint8(1), patch: p.getUint8(2) };
        const want = this.options.expectMajor;
        if (want !== undefined && this.version.major !== want) {
          return this.finish({
            fail: {
              kind: "wrong_version",
              message: `speaks RPC protocol v${versionText(this.version)} but llama-server needs v${want}.x`,
              version: this.version,
            },
          });
        }
        return this.next({ ask: "count" });
      }
      case "count": {
        this.count = p.getUint32(0, true);
        if (this.count === 0 || this.count > MAX_DEVICES) {
          return this.finish({
            fail: {
              kind: "malformed",
              message: `reported ${this.count} devices (llama.cpp uses 1 to ${MAX_DEVICES})`,
              ...(this.version ? { version: this.version } : {}),
            },
          });
        }
        return this.next({ ask: "memory", device: 0 });
      }
      case "memory": {
        const [freeBig, totalBig] = [p.getBigUint64(0, true), p.getBigUint64(8, true)];
        const free = Number(freeBig);
        const total = Number(totalBig);
        if (Math.max(free, total) > MAX_DEVICE_BYTES) {
          return this.finish({
            fail: {
              kind: "malformed",
              message: `reported ${freeBig > totalBig ? freeBig : totalBig} bytes of memory on device ${this.devices.length}, more than any device has (not an RPC worker, or garbage)`,
              ...(this.version ? { version: this.version } : {}),
            },
          });
        }
        this.devices.push({ free_bytes: Math.min(free, total), total_bytes: total });
        if (this.devices.length < this.count)
          return this.next({ ask: "memory", device: this.devices.length });
        return this.finish({ done: { version: this.version as RpcVersion, devices: this.devices } });
      }
    }
  }
}
