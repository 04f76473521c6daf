import { closeSync, openSync, readSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";

/** Architectures by the numbers an executable's header gives them, named as Node's `process.arch`. */
const ELF_MACHINE: Record<number, string> = { 3: "ia32", 40: "arm", 62: "x64", 183: "arm64", 243: "riscv64" };
const MACHO_CPU: Record<number, string> = { 7: "ia32", 12: "arm", 16777223: "x64", 16777228: "arm64" };
const PE_MACHINE: Record<number, string> = { 332: "ia32", 452: "arm", 34404: "x64", 43620: "arm64" };

/** Enough of a file for any of the three headers (a PE's sits where its DOS stub points, near the start). */
const HEAD_BYTES = 4096;

export interface ExecutableKind {
  platform: "linux" | "darwin" | "win32";
  arch: string;
}

/**
 * What system and processor an executable's first bytes say it is for: an ELF (Linux), a thin
 * Mach-O (macOS; a universal one holds several and is not judged) or a PE (Windows). Undefined
 * for anything else, a script included.
 */
export function executableKind(head: Uint8Array): ExecutableKind | undefined {
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  const u32 = (at: number, little = true) =>
    at + 4 <= view.byteLength ? view.getUint32(at, little) : undefined;
  const u16 = (at: number, little = true) =>
    at + 2 <= view.byteLength ? view.getUint16(at, little) : undefined;
  if (u32(0, false) === 0x7f454c46) {
    const machine = u16(18, head[5] !== 2);
    if (machine === undefined) return undefined;
    return { platform: "linux", arch: ELF_MACHINE[machine] ?? `machine ${machine}` };
  }
  if (u32(0) === 0xfeedfacf || u32(0) === 0xfeedface) {
    const cpu = u32(4);
    if (cpu === undefined) return undefined;
    return { platform: "darwin", arch: MACHO_CPU[cpu] ?? `cpu type ${cpu}` };
  }
  if (u16(0, false) === 0x4d5a) {
    const pe = u32(0x3c);
    if (pe === undefined || u32(pe, false) !== 0x50450000) return undefined;
    const machine = u16(pe + 4);
    if (machine === undefined) return undefined;
    return { platform: "win32", arch: PE_MACHINE[machine] ?? `machine ${machine}` };
  }
  return undefined;
}

/**
 * Why `command` could not run here, when it is an executable built for another system or
 * processor (an x64 core packed into an arm64 app): Node's spawn hands such a file to `/bin/sh`,
 * which exits 127 saying "not found", and the host would see only that (docs/bootstrap.md).
 * Read only after a core ended before its first line; undefined when the file is not one or
 * cannot be read.
 */
export function foreignBinary(
  command: string,
  cwd: string | undefined,
  here: { platform: string; arch: string } = process,
): string | undefined {
  // A bare name was looked up on PATH by spawn: which file ran is not known here.
  if (!command.includes("/") && !command.includes("\\")) return undefined;
  const path = isAbsolute(command) ? command : resolve(cwd ?? process.cwd(), command);
  let kind: ExecutableKind | undefined;
  try {
    const fd = openSync(path, "r");
    try {
      const head = new Uint8Array(HEAD_BYTES);
      kind = executableKind(head.subarray(0, readSync(fd, head, 0, HEAD_BYTES, 0)));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  if (!kind || (kind.platform === here.platform && kind.arch === here.arch)) return undefined;
  return `ENOEXEC: ${path} is a ${kind.platform}-${kind.arch} executable; this machine is ${here.platform}-${here.arch}: ship the core built for it`;
}
