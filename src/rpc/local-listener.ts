import { open } from "node:fs/promises";
import { endianness, networkInterfaces } from "node:os";

/** The tables the kernel keeps of this machine's TCP sockets. */
const TABLES = ["/proc/net/tcp", "/proc/net/tcp6"];
/** Read in pieces this big, the loop given back between them. */
const PIECE_BYTES = 64 * 1024;
/** No more of a table is read: thousands of listeners; one past it is not found (the address decides). */
const MOST_BYTES = 512 * 1024;

/**
 * Which listening socket of this machine a connection to `ip:port` reached, on Linux: a worker
 * bound to 0.0.0.0 and listed as `127.0.0.1:P` and as its LAN address `192.168.1.5:P` reaches
 * two addresses but one worker (llama-server would use it twice). The kernel hands a connection
 * to the listener bound to that very address, else to the wildcard one, so the listener's inode
 * names the worker; two workers bound to two addresses on one port stay two. Undefined when the
 * address is not this machine's, or the tables cannot be read (another OS): the address decides.
 * Never rejects. `tables`: their paths (tests give their own).
 */
export async function localListener(ip: string, port: number, tables = TABLES): Promise<string | undefined> {
  if (process.platform !== "linux" || !isLocal(ip)) return undefined;
  const texts: string[] = [];
  for (const file of tables) {
    try {
      texts.push(await listenerRows(file));
    } catch {
      // No IPv6 on this machine, or /proc hidden: what the other table says still counts.
    }
  }
  return listenerIn(texts, ip, port, endianness() === "LE");
}

/**
 * A table's rows up to its first that is not a listener: the kernel lists its listening sockets
 * first, then every connection, which on a busy machine are megabytes that `ping` would wait out
 * on the main loop. Read in pieces off the loop, at most MOST_BYTES; whole rows only.
 */
export async function listenerRows(file: string): Promise<string> {
  const handle = await open(file, "r");
  try {
    const piece = Buffer.alloc(PIECE_BYTES);
    let text = "";
    while (text.length < MOST_BYTES) {
      const { bytesRead } = await handle.read(piece, 0, PIECE_BYTES, null);
      if (bytesRead === 0) return text;
      text += piece.toString("latin1", 0, bytesRead);
      const rows = text
        .slice(0, text.lastIndexOf("\n") + 1)
        .split("\n")
        .slice(1);
      const past = rows.findIndex((r) => r.trim() !== "" && r.trim().split(/\s+/)[3] !== "0A");
      if (past >= 0)
        return text
          .split("\n")
          .slice(0, past + 1)
          .join("\n");
    }
    return text.slice(0, text.lastIndexOf("\n") + 1);
  } finally {
    await handle.close();
  }
}

/** The listener (as `inode N`) an IPv4 `ip:port` reaches, from /proc/net/tcp and tcp6's text. Pure. */
export function listenerIn(
  tables: readonly string[],
  ip: string,
  port: number,
  littleEndian = true,
): string | undefined {
  const word = ipv4Word(ip, littleEndian);
  if (word === undefined) return undefined;
  const portHex = port.toString(16).toUpperCase().padStart(4, "0");
  const mapped = `0000000000000000${littleEndian ? "FFFF0000" : "0000FFFF"}${word}`;
  // Most specific first: the address itself, then 0.0.0.0, then a dual-stack `::`.
  const rank = new Map([
    [word, 0],
    [mapped, 0],
    ["00000000", 1],
    ["0".repeat(32), 2],
  ]);
  let best: { rank: number; inode: string } | undefined;
  for (const line of tables.flatMap((t) => t.split("\n"))) {
    const f = line.trim().split(/\s+/);
    // sl, local_address, rem_address, st (0A is LISTEN), …, inode is the tenth field.
    if (f.length < 10 || f[3] !== "0A") continue;
    const [addr, p] = f[1]!.split(":");
    const r = rank.get(addr!.toUpperCase());
    if (p?.toUpperCase() !== portHex || r === undefined || f[9] === "0") continue;
    if (!best || r < best.rank) best = { rank: r, inode: f[9]! };
  }
  return best && `inode ${best.inode}`;
}

function ipv4Word(ip: string, littleEndian: boolean): string | undefined {
  const parts = ip.split(".").map(Number);
  if (parts.length !== 4 || parts.some((n) => !Number.isInteger(n) || n < 0 || n > 255)) return undefined;
  const bytes = littleEndian ? parts.reverse() : parts;
  return bytes.map((n) => n.toString(16).toUpperCase().padStart(2, "0")).join("");
}

/** 127.0.0.0/8 (all of it is loopback on Linux) or an address of one of this machine's interfaces. */
function isLocal(ip: string): boolean {
  if (ip.startsWith("127.")) return true;
  try {
    return Object.values(networkInterfaces()).some((list) => list?.some((a) => a.address === ip));
  } catch {
    // Some sandboxes refuse the interface list (it throws there): the address decides, as on another OS.
    return false;
  }
}
