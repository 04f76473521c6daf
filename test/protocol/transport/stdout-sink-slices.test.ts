import { expect, test } from "bun:test";
import { EventEmitter } from "node:events";
import { stdoutSink, WRITE_SLICE_CHARS, Writer } from "../../../src/protocol/transport/writer.ts";

/**
 * A stdout whose pipe is full after each write (write() false, as Node says for a write past its
 * high-water mark) and whose host closes its end after `closeAfter` writes: EPIPE, as Node and
 * Bun report it, on the 'error' event and not as a 'drain'.
 */
function closingStdout(closeAfter: number) {
  const stream = new EventEmitter() as EventEmitter & { write: (d: string, cb: () => void) => boolean };
  const writes: string[] = [];
  stream.write = (data: string) => {
    writes.push(data);
    if (writes.length === closeAfter) {
      const err = Object.assign(new Error("write EPIPE"), { code: "EPIPE" });
      setImmediate(() => stream.emit("error", err));
    } else setImmediate(() => stream.emit("drain"));
    return false;
  };
  return { stream: stream as unknown as NodeJS.WriteStream, writes };
}

test("a host that closes stdout in the middle of a sliced answer: no throw, no hang, the rest discarded", async () => {
  const { stream, writes } = closingStdout(2);
  const w = new Writer(stdoutSink(stream), { queueSize: 100 });
  const data = "a".repeat(4 * WRITE_SLICE_CHARS);
  await w.terminal({ id: "a", type: "result", result: { data } });
  // A ping answered meanwhile is queued behind the long line, never written inside it.
  await w.terminal({ id: "p", type: "result", result: {} });
  expect(await w.drain(5000)).toBe(true);
  expect(w.isBroken).toBe(true);
  expect(writes.length).toBe(2);
  expect(writes.join("")).not.toContain('"p"');
  // Output after the close is discarded at once, not waited on.
  expect(w.tryTerminal({ id: "q", type: "result", result: {} })).toBe(true);
  expect(await w.drain(5000)).toBe(true);
});
