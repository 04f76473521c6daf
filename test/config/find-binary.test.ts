import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type FindBinaryEnv, findLlamaServer } from "../../src/config/find-binary.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const env = (files: string[], over: Partial<FindBinaryEnv> = {}): FindBinaryEnv => ({
  execPath: "/opt/app/local-ai",
  platform: "linux",
  pathEnv: "/usr/bin:/usr/local/bin",
  isFile: (p) => files.includes(p),
  ...over,
});
const cfg = (binary: string | null) => ConfigSchema.parse({ llama: { binary } });

describe("findLlamaServer", () => {
  test("the configured path wins, and only it is tried", () => {
    expect(
      findLlamaServer(cfg("/x/llama-server"), env(["/x/llama-server", "/opt/app/llama-server"])),
    ).toEqual({ path: "/x/llama-server" });
    expect(findLlamaServer(cfg("/x/missing"), env(["/opt/app/llama-server"]))).toEqual({
      tried: ["/x/missing"],
    });
  });
  test("next to the executable before PATH", () => {
    expect(findLlamaServer(cfg(null), env(["/opt/app/llama-server", "/usr/bin/llama-server"]))).toEqual({
      path: "/opt/app/llama-server",
    });
    expect(findLlamaServer(cfg(null), env(["/usr/local/bin/llama-server"]))).toEqual({
      path: "/usr/local/bin/llama-server",
    });
  });
  test("lists every place tried; .exe on Windows", () => {
    expect(findLlamaServer(cfg(null), env([]))).toEqual({
      tried: ["/opt/app/llama-server", "/usr/bin/llama-server", "/usr/local/bin/llama-server"],
    });
    const win = env([], { platform: "win32", execPath: "/opt/app/local-ai.exe", pathEnv: "" });
    expect(findLlamaServer(cfg(null), win)).toEqual({ tried: ["/opt/app/llama-server.exe"] });
  });
  test("a folder named twice (PATH repeats, or holds the executable's own folder) is tried once", () => {
    const repeats = env([], { pathEnv: "/usr/bin:/opt/app:/usr/bin/:/usr/local/bin:/usr/bin" });
    expect(findLlamaServer(cfg(null), repeats)).toEqual({
      tried: ["/opt/app/llama-server", "/usr/bin/llama-server", "/usr/local/bin/llama-server"],
    });
  });
});

describe("findLlamaServer passes over a file it may not run, as a shell does", () => {
  test("a non-executable llama-server beside the executable does not hide one on PATH", () => {
    const files = ["/opt/app/llama-server", "/usr/local/bin/llama-server"];
    const e = env(files, { isExecutable: (p) => p !== "/opt/app/llama-server" });
    expect(findLlamaServer(cfg(null), e)).toEqual({ path: "/usr/local/bin/llama-server" });
  });
  test("when none may be run, the first one found is the answer (doctor then says chmod +x)", () => {
    const e = env(["/usr/bin/llama-server"], { isExecutable: () => false });
    expect(findLlamaServer(cfg(null), e)).toEqual({ path: "/usr/bin/llama-server" });
  });
  test("on a real file system", () => {
    using dir = tmpdir();
    const stray = join(dir.path, "a");
    const good = join(dir.path, "b");
    for (const [d, mode] of [
      [stray, 0o644],
      [good, 0o755],
    ] as const) {
      mkdirSync(d);
      writeFileSync(join(d, "llama-server"), "#!/bin/sh\n");
      chmodSync(join(d, "llama-server"), mode);
    }
    const saved = process.env.PATH;
    process.env.PATH = `${stray}:${good}`;
    try {
      const found = findLlamaServer(ConfigSchema.parse({}));
      expect(found).toEqual({ path: join(good, "llama-server") });
    } finally {
      process.env.PATH = saved;
    }
  });
});
