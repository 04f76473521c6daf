import { describe, expect, test } from "bun:test";
import { executableFormat } from "../../scripts/executable-format.ts";
import { executableHeader } from "./fake-llama-release.ts";

describe("executable format", () => {
  test("ELF, Mach-O and PE headers name their OS and CPU", () => {
    expect(executableFormat(executableHeader("linux", "x64"))).toEqual({ os: "linux", archs: ["x64"] });
    expect(executableFormat(executableHeader("linux", "arm64"))).toEqual({ os: "linux", archs: ["arm64"] });
    expect(executableFormat(executableHeader("darwin", "arm64"))).toEqual({ os: "darwin", archs: ["arm64"] });
    expect(executableFormat(executableHeader("windows", "x64"))).toEqual({ os: "windows", archs: ["x64"] });
    expect(executableFormat(new TextEncoder().encode("#!/bin/sh\necho llama-server\n"))).toBeUndefined();
    expect(executableFormat(new TextEncoder().encode("MZ but no PE header"))).toBeUndefined();
  });

  test("a universal macOS binary counts for each CPU it holds", () => {
    const fat = new Uint8Array(64);
    const view = new DataView(fat.buffer);
    view.setUint32(0, 0xcafebabe);
    view.setUint32(4, 2);
    view.setUint32(8, 0x01000007);
    view.setUint32(28, 0x0100000c);
    expect(executableFormat(fat)).toEqual({ os: "darwin", archs: ["x64", "arm64"] });
  });
});
