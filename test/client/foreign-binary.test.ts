import { describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { chmodSync, closeSync, existsSync, openSync, readFileSync, readSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { executableKind, foreignBinary } from "../../src/client/foreign-binary.ts";
import { LocalAiClient } from "../../src/client/index.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { rejection } from "./fake-core-fixture.ts";

/** A 64-bit little-endian ELF header for `machine` (x86-64 is 0x3e, AArch64 0xb7), padded. */
function elf(machine: number, bigEndian = false): Uint8Array {
  const head = new Uint8Array(256);
  head.set([0x7f, 0x45, 0x4c, 0x46, 2, bigEndian ? 2 : 1, 1]);
  new DataView(head.buffer).setUint16(18, machine, !bigEndian);
  return head;
}

function macho(cpu: number): Uint8Array {
  const head = new Uint8Array(64);
  const view = new DataView(head.buffer);
  view.setUint32(0, 0xfeedfacf, true);
  view.setUint32(4, cpu, true);
  return head;
}

function pe(machine: number): Uint8Array {
  const head = new Uint8Array(512);
  const view = new DataView(head.buffer);
  head.set([0x4d, 0x5a]);
  view.setUint32(0x3c, 0x80, true);
  head.set([0x50, 0x45, 0, 0], 0x80);
  view.setUint16(0x84, machine, true);
  return head;
}

/** An architecture this machine is not, as the header of a wrongly packed core would say. */
const OTHER_ARCH =
  process.arch === "arm64" ? { arch: "x64", machine: 0x3e } : { arch: "arm64", machine: 0xb7 };

/** An executable core file whose header is for OTHER_ARCH. */
function foreignCore(folder: string): string {
  const binary = join(folder, "local-ai");
  writeFileSync(binary, elf(OTHER_ARCH.machine));
  chmodSync(binary, 0o755);
  return binary;
}

describe("a core binary built for another machine", () => {
  test("the header's system and processor are read for ELF, thin Mach-O and PE; others are not judged", () => {
    expect(executableKind(elf(0x3e))).toEqual({ platform: "linux", arch: "x64" });
    expect(executableKind(elf(0xb7))).toEqual({ platform: "linux", arch: "arm64" });
    expect(executableKind(elf(0x15, true))).toEqual({ platform: "linux", arch: "machine 21" });
    expect(executableKind(macho(0x0100000c))).toEqual({ platform: "darwin", arch: "arm64" });
    expect(executableKind(macho(0x01000007))).toEqual({ platform: "darwin", arch: "x64" });
    expect(executableKind(pe(0x8664))).toEqual({ platform: "win32", arch: "x64" });
    expect(executableKind(pe(0xaa64))).toEqual({ platform: "win32", arch: "arm64" });
    expect(executableKind(new TextEncoder().encode("#!/bin/sh\necho hi\n"))).toBeUndefined();
    // A DOS stub pointing past what was read, and a header cut short, are not judged.
    expect(executableKind(pe(0x8664).subarray(0, 0x82))).toBeUndefined();
    expect(executableKind(elf(0x3e).subarray(0, 10))).toBeUndefined();
  });

  test("the runtime running this test is this machine's own: not foreign", () => {
    const fd = openSync(process.execPath, "r");
    const head = new Uint8Array(4096);
    readSync(fd, head, 0, head.length, 0);
    closeSync(fd);
    const kind = executableKind(head);
    expect(kind).toEqual({ platform: process.platform as "linux", arch: process.arch });
    expect(foreignBinary(process.execPath, undefined)).toBeUndefined();
  });

  test("Bun's ENOEXEC says which machine the file is for", async () => {
    if (process.platform !== "linux") return;
    await using dir = tmpdir();
    const binary = foreignCore(dir.path);
    const err = await rejection(LocalAiClient.start({ binary }));
    expect(err.code).toBe("core_exited");
    expect(String(err.data?.spawn_error)).toBe(
      `ENOEXEC: ${binary} is a linux-${OTHER_ARCH.arch} executable; this machine is linux-${process.arch}: ship the core built for it`,
    );
  });

  test("under Node, the shell's exit 127 for such a file is told as the same spawn_error", async () => {
    if (process.platform !== "linux") return;
    await using dir = tmpdir();
    const binary = foreignCore(dir.path);
    // What glibc's execvp does under Node's spawn on ENOEXEC: the file is run as a shell script.
    const nodeLike = (command: string, args: string[], options: object) =>
      spawn("/bin/sh", [command, ...args], options);
    const err = await rejection(LocalAiClient.start({ binary, spawn: nodeLike }));
    expect(err.code).toBe("core_exited");
    expect(err.data?.exit_code).toBe(127);
    expect(String(err.data?.spawn_error)).toContain(`is a linux-${OTHER_ARCH.arch} executable`);
    expect(err.message).toContain("could not be started (ENOEXEC:");
  });

  test("a real executable of another machine, which dash reads as a script and exits 2 on, is told so too", async () => {
    // Debian's and Ubuntu's /bin/sh is dash: on a binary's bytes it says "Syntax error" and exits
    // 2, not 126 or 127 (bash's), so the header was never read there.
    if (process.platform !== "linux" || !existsSync("/bin/true")) return;
    await using dir = tmpdir();
    const binary = join(dir.path, "local-ai");
    const bytes = readFileSync("/bin/true");
    new DataView(bytes.buffer, bytes.byteOffset).setUint16(18, OTHER_ARCH.machine, true);
    writeFileSync(binary, bytes);
    chmodSync(binary, 0o755);
    const nodeLike = (command: string, args: string[], options: object) =>
      spawn("/bin/sh", [command, ...args], options);
    const err = await rejection(LocalAiClient.start({ binary, spawn: nodeLike }));
    expect(err.code).toBe("core_exited");
    expect(String(err.data?.spawn_error)).toContain(`is a linux-${OTHER_ARCH.arch} executable`);
  });

  test("a core of another machine that runs (emulated) and exits 2 on its usage is told by its exit", async () => {
    // Rosetta, Windows on Arm and qemu-user run such a core; its usage error (a flag this older
    // core does not know) exits 2 before its first line, with no word of dash's ("Syntax error").
    if (process.platform === "win32") return;
    await using dir = tmpdir();
    const binary = join(dir.path, "local-ai");
    writeFileSync(binary, elf(OTHER_ARCH.machine));
    chmodSync(binary, 0o755);
    const emulated = (_command: string, _args: string[], options: object) =>
      spawn("/bin/sh", ["-c", "echo \"unknown option '--new-flag'\" >&2; exit 2"], options);
    const err = await rejection(LocalAiClient.start({ binary, spawn: emulated }));
    expect(err.code).toBe("core_exited");
    expect(err.data?.exit_code).toBe(2);
    expect(err.data?.spawn_error).toBeUndefined();
    expect(err.data?.stderr_tail).toEqual(["unknown option '--new-flag'"]);
  });

  test("a core of this machine that exits 127 before its first line is told by its exit, as before", async () => {
    if (process.platform === "win32") return;
    await using dir = tmpdir();
    const binary = join(dir.path, "local-ai");
    writeFileSync(binary, "#!/bin/sh\necho 'missing library' >&2\nexit 127\n");
    chmodSync(binary, 0o755);
    const err = await rejection(LocalAiClient.start({ binary }));
    expect(err.code).toBe("core_exited");
    expect(err.data?.exit_code).toBe(127);
    expect(err.data?.spawn_error).toBeUndefined();
    expect(err.data?.stderr_tail).toEqual(["missing library"]);
  });
});
