import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  deviceCountRequest,
  deviceMemoryRequest,
  helloRequest,
  type QueryStep,
  WorkerQuery,
} from "../../src/rpc/wire.ts";
import { TRANSCRIPTS } from "../fixtures/recordings-dir.ts";

const WIRE = join(TRANSCRIPTS, "87-rpc-wire.txt");

/** The recording's byte lines: `->` requests and `<-` replies, in order. */
function recorded(): { requests: Uint8Array[]; replies: Uint8Array[] } {
  const text = readFileSync(WIRE, "utf8");
  const hex = (line: string) =>
    new Uint8Array(
      (line.split("bytes: ")[1] as string)
        .trim()
        .split(/\s+/)
        .map((h) => Number.parseInt(h, 16)),
    );
  const lines = text.split("\n");
  return {
    requests: lines.filter((l) => l.startsWith("-> ")).map(hex),
    replies: lines.filter((l) => l.startsWith("<- ")).map(hex),
  };
}

function u64(n: bigint): number[] {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, n, true);
  return [...b];
}

const helloReply = (major = 5, minor = 1, patch = 0) =>
  new Uint8Array([...u64(28n), major, minor, patch, ...new Array(25).fill(0)]);
const countReply = (n: number) =>
  new Uint8Array([...u64(4n), n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, (n >>> 24) & 0xff]);
const memReply = (free: bigint, total: bigint) => new Uint8Array([...u64(16n), ...u64(free), ...u64(total)]);

describe("the worker query speaks the recorded bytes (transcript 87)", () => {
  test("requests are byte for byte the recorded ones", () => {
    const { requests } = recorded();
    expect([...helloRequest()]).toEqual([...(requests[0] as Uint8Array)]);
    expect([...deviceCountRequest()]).toEqual([...(requests[1] as Uint8Array)]);
    expect([...deviceMemoryRequest(0)]).toEqual([...(requests[2] as Uint8Array)]);
  });

  test("the recorded replies read as v5.1.0, one device with 24105 MiB free of 24105 MiB", () => {
    const { replies } = recorded();
    const q = new WorkerQuery();
    q.first();
    expect(q.push(replies[0] as Uint8Array)).toEqual({ send: deviceCountRequest() });
    expect(q.push(replies[1] as Uint8Array)).toEqual({ send: deviceMemoryRequest(0) });
    expect(q.push(replies[2] as Uint8Array)).toEqual({
      done: {
        version: { major: 5, minor: 1, patch: 0 },
        devices: [{ free_bytes: 25276059648, total_bytes: 25276059648 }],
      },
    });
  });

  test("replies split at every byte boundary read the same", () => {
    const { replies } = recorded();
    const q = new WorkerQuery();
    let last: QueryStep = { wait: true };
    for (const reply of replies) for (const byte of reply) last = q.push(new Uint8Array([byte]));
    expect("done" in last).toBe(true);
  });
});

describe("WorkerQuery against hostile or foreign answers", () => {
  const run = (bytes: number[] | Uint8Array, options = {}) => {
    const q = new WorkerQuery(options);
    q.first();
    return q.push(new Uint8Array(bytes));
  };

  test("several devices are asked one by one", () => {
    const q = new WorkerQuery();
    q.push(helloReply());
    expect(q.push(countReply(2))).toEqual({ send: deviceMemoryRequest(0) });
    expect(q.push(memReply(10n, 20n))).toEqual({ send: deviceMemoryRequest(1) });
    const done = q.push(memReply(30n, 20n)); // free above total is taken as total
    expect(done).toEqual({
      done: {
        version: { major: 5, minor: 1, patch: 0 },
        devices: [
          { free_bytes: 10, total_bytes: 20 },
          { free_bytes: 20, total_bytes: 20 },
        ],
      },
    });
  });

  test("memory no machine has (2^64 - 1 bytes, past 2^53 where a number is exact) is malformed, not a budget", () => {
    const q = new WorkerQuery();
    q.push(helloReply());
    q.push(countReply(1));
    expect(q.push(memReply(2n ** 64n - 1n, 2n ** 64n - 1n))).toMatchObject({
      fail: { kind: "malformed", message: expect.stringContaining("device 0"), version: { major: 5 } },
    });
    const ok = new WorkerQuery();
    ok.push(helloReply());
    ok.push(countReply(1));
    expect(ok.push(memReply(2n ** 44n, 2n ** 44n))).toHaveProperty("done"); // 16 TiB: a big server's RAM
  });

  test("a huge size field fails at once, before any payload is kept", () => {
    const step = run([...u64(2n ** 63n), 1, 2, 3]);
    expect(step).toMatchObject({ fail: { kind: "malformed" } });
    expect((step as { fail: { message: string } }).fail.message).toContain("9223372036854775808");
  });

  test("garbage is malformed; an HTTP answer is named as such", () => {
    expect(run([...new TextEncoder().encode("\xff\xfe garbage garbage")])).toMatchObject({
      fail: { kind: "malformed" },
    });
    const http = run([...new TextEncoder().encode("HTTP/1.1 400 Bad Request\r\n\r\n")]);
    expect(http).toMatchObject({ fail: { kind: "malformed" } });
    expect((http as { fail: { message: string } }).fail.message).toContain("HTTP server");
  });

  test("a short HELLO reply is another protocol version, not garbage", () => {
    expect(run([...u64(3n), 3, 0, 0])).toMatchObject({ fail: { kind: "wrong_version" } });
  });

  test("another major version than the one asked for is wrong_version, with the version", () => {
    expect(run(helloReply(7, 0, 0), { expectMajor: 5 })).toEqual({
      fail: {
        kind: "wrong_version",
        message: "speaks RPC protocol v7.0.0 but llama-server needs v5.x",
        version: { major: 7, minor: 0, patch: 0 },
      },
    });
    expect(run(helloReply(7, 0, 0), { expectMajor: 7 })).toEqual({ send: deviceCountRequest() });
  });

  test("bytes beyond a reply are malformed", () => {
    expect(run([...helloReply(), 9, 9])).toMatchObject({
      fail: { kind: "malformed", message: expect.stringContaining("more bytes") },
    });
  });

  test.each([0, 17, 0xffffffff])("a device count of %d is malformed", (n) => {
    const q = new WorkerQuery();
    q.push(helloReply());
    expect(q.push(countReply(n))).toMatchObject({ fail: { kind: "malformed", version: { major: 5 } } });
  });

  test("a wrong size for DEVICE_COUNT or GET_DEVICE_MEMORY is malformed", () => {
    const q = new WorkerQuery();
    q.push(helloReply());
    expect(q.push(new Uint8Array([...u64(8n), 1, 0, 0, 0, 0, 0, 0, 0]))).toMatchObject({
      fail: { kind: "malformed" },
    });
  });

  test("an incomplete reply waits; closing then says where it stopped", () => {
    const q = new WorkerQuery();
    expect(q.closed()).toMatchObject({
      kind: "closed",
      message: expect.stringContaining("without answering HELLO"),
    });
    expect(q.push(new Uint8Array([28, 0, 0]))).toEqual({ wait: true });
    expect(q.closed().message).toContain("middle of its HELLO reply");
    q.push(new Uint8Array([...u64(28n).slice(3), 5, 1, 0, ...new Array(25).fill(0)]));
    expect(q.closed()).toMatchObject({
      kind: "closed",
      version: { major: 5 },
      message: expect.stringContaining("DEVICE_COUNT"),
    });
  });

  test("once failed, it stays failed", () => {
    const q = new WorkerQuery();
    const failed = q.push(new Uint8Array(u64(99n)));
    expect(q.push(helloReply())).toEqual(failed);
  });
});
