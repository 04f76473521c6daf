/**
 * Which OS and CPU an executable is for, from its first bytes (ELF, Mach-O, PE). A release must
 * not put a llama-server built for one target into another target's archive; names alone do not
 * tell (a Linux and a macOS llama-server are both called `llama-server`).
 */
import { closeSync, openSync, readSync } from "node:fs";

type Arch = "x64" | "arm64" | "other";

export interface ExecutableFormat {
  os: "linux" | "darwin" | "windows";
  /** One CPU, or several for a universal macOS binary. */
  archs: Arch[];
}

// The machine codes, as the formats' specifications write them (hex).
const ELF_MACHINE = new Map<number, Arch>([
  [0x3e, "x64"],
  [0xb7, "arm64"],
]);
const MACHO_CPU = new Map<number, Arch>([
  [0x01000007, "x64"],
  [0x0100000c, "arm64"],
]);
const PE_MACHINE = new Map<number, Arch>([
  [0x8664, "x64"],
  [0xaa64, "arm64"],
]);

/** The format of these leading bytes (at least 64, plus the PE header on Windows), if known. */
export function executableFormat(bytes: Uint8Array): ExecutableFormat | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const u32be = (o: number) => (o + 4 <= bytes.length ? view.getUint32(o, false) : -1);
  if (u32be(0) === 0x7f454c46) {
    // ELF: e_machine at 18, in the byte order e_ident[5] names (1 little, 2 big).
    const machine = bytes.length >= 20 ? view.getUint16(18, bytes[5] === 1) : -1;
    return { os: "linux", archs: [ELF_MACHINE.get(machine) ?? "other"] };
  }
  if (u32be(0) === 0xcffaedfe) {
    // 64-bit Mach-O, little-endian: cputype follows the magic.
    return { os: "darwin", archs: [MACHO_CPU.get(view.getUint32(4, true)) ?? "other"] };
  }
  if (u32be(0) === 0xcafebabe) {
    // A universal (fat) Mach-O: a count, then one 20-byte record per architecture.
    const archs: Arch[] = [];
    for (let i = 0; i < u32be(4) && 8 + i * 20 + 4 <= bytes.length; i++)
      archs.push(MACHO_CPU.get(u32be(8 + i * 20)) ?? "other");
    return { os: "darwin", archs };
  }
  if (bytes[0] === 0x4d && bytes[1] === 0x5a && bytes.length >= 64) {
    // PE: "MZ", then the offset of "PE\0\0" at 0x3c; the machine follows it.
    const pe = view.getUint32(0x3c, true);
    if (pe + 6 <= bytes.length && u32be(pe) === 0x50450000) {
      return { os: "windows", archs: [PE_MACHINE.get(view.getUint16(pe + 4, true)) ?? "other"] };
    }
  }
  return undefined;
}

/** The format of a file on disk (reads its first 4 KiB). */
export function fileExecutableFormat(path: string): ExecutableFormat | undefined {
  const fd = openSync(path, "r");
  try {
    const buf = new Uint8Array(4096);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return executableFormat(buf.subarray(0, n));
  } finally {
    closeSync(fd);
  }
}

/** Whether a file is an executable for `<os>-<arch>`; says what it is otherwise. */
export function checkExecutableFor(path: string, os: string, arch: string): string | undefined {
  const format = fileExecutableFormat(path);
  if (!format) return `${path} is not an executable (no ELF, Mach-O or PE header)`;
  if (format.os === os && format.archs.includes(arch as Arch)) return undefined;
  return `${path} is a ${format.os}-${format.archs.join("+")} executable, not ${os}-${arch}`;
}
