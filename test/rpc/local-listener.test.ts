import { describe, expect, spyOn, test } from "bun:test";
import { appendFileSync, statSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import { join } from "node:path";
import { listenerIn, listenerRows, localListener } from "../../src/rpc/local-listener.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Which listening socket a connection to one of this machine's addresses reaches, read from
// /proc/net/tcp{,6} as the kernel would pick it (src/rpc/local-listener.ts).

const HEAD =
  "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
const row = (local: string, st: string, inode: number) =>
  `   0: ${local} 00000000:0000 ${st} 00000000:00000000 00:00000000 00000000  1000        0 ${inode} 1 0000000000000000 100 0 0 10 0`;
const tcp = (...rows: string[]) => [HEAD, ...rows].join("\n");

describe("listenerIn", () => {
  test("a wildcard listener is reached from every address; one bound to the address itself comes first", () => {
    const wild = tcp(row("00000000:C364", "0A", 11));
    expect(listenerIn([wild], "127.0.0.1", 50020)).toBe("inode 11");
    expect(listenerIn([wild], "192.168.1.5", 50020)).toBe("inode 11");
    const both = tcp(row("00000000:C364", "0A", 11), row("0501A8C0:C364", "0A", 22));
    expect(listenerIn([both], "192.168.1.5", 50020)).toBe("inode 22");
    expect(listenerIn([both], "127.0.0.1", 50020)).toBe("inode 11");
  });

  test("another port, a connection that is not a listener, nothing listening: no answer", () => {
    const t = tcp(row("0100007F:C365", "0A", 11), row("0100007F:C364", "01", 12));
    expect(listenerIn([t], "127.0.0.1", 50020)).toBeUndefined();
    expect(listenerIn([], "127.0.0.1", 50020)).toBeUndefined();
    expect(listenerIn([t], "not-an-ip", 50020)).toBeUndefined();
  });

  test("tcp6: an IPv4-mapped bind, a dual-stack ::, and a big-endian machine's words", () => {
    const mapped = tcp(row("0000000000000000FFFF00000100007F:C364", "0A", 31));
    expect(listenerIn([mapped], "127.0.0.1", 50020)).toBe("inode 31");
    const dual = tcp(row(`${"0".repeat(32)}:C364`, "0A", 32));
    expect(listenerIn([dual], "10.0.0.7", 50020)).toBe("inode 32");
    expect(listenerIn([tcp(row("00000000:C364", "0A", 33)), dual], "10.0.0.7", 50020)).toBe("inode 33");
    expect(listenerIn([tcp(row("7F000001:C364", "0A", 34))], "127.0.0.1", 50020, false)).toBe("inode 34");
  });
});

describe("localListener where the interface list is refused", () => {
  test("a throwing networkInterfaces (some sandboxes) leaves the address to decide, not a crash", async () => {
    const spy = spyOn(os, "networkInterfaces").mockImplementation(() => {
      throw new Error("uv_interface_addresses returned Unknown system error 13");
    });
    try {
      expect(await localListener("192.0.2.7", 50052)).toBeUndefined();
      expect(spy).toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });
});

describe("localListener on a machine with many sockets", () => {
  test("a table is read only as far as its listeners, off the loop: a 20 MB one is never read whole", async () => {
    if (process.platform !== "linux") return;
    using dir = tmpdir("local-ai-tcp-");
    const file = join(dir.path, "tcp");
    // The kernel lists its listening sockets first, then every connection (established, TIME_WAIT…).
    const connections = Array.from({ length: 1000 }, (_, i) =>
      row(`0100007F:${(i + 1).toString(16)}`, "01", 0),
    );
    const block = `${connections.join("\n")}\n`;
    writeFileSync(file, `${tcp(row("00000000:C364", "0A", 4242))}\n`);
    for (let i = 0; i < 200; i++) appendFileSync(file, block);
    expect(statSync(file).size).toBeGreaterThan(20_000_000);
    expect(await localListener("127.0.0.1", 50020, [file])).toBe("inode 4242");
    // Read up to the first row that is not a listener, never to the end.
    expect((await listenerRows(file)).length).toBeLessThan(1024 * 1024);
  });
});
