import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type FindBinaryEnv, findLlamaServer } from "../../src/config/find-binary.ts";
import { findLlamaServerAsked } from "../../src/config/find-binary-asked.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";
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
  test("on a real file system", async () => {
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
    const places = {
      execPath: join(dir.path, "local-ai"),
      platform: process.platform,
      pathEnv: `${stray}:${good}`,
    };
    const found = await findLlamaServerAsked(ConfigSchema.parse({}), undefined, places);
    expect(found).toEqual({ path: join(good, "llama-server") });
  });
});

// The lookup stat'ed `llama.binary` and each PATH folder's llama-server with synchronous calls on
// the core's loop, at every start, plan and doctor: one on a network share gone offline held the
// whole core, ping and cancel too. Each place is now asked of its drive off the loop first.
describe("findLlamaServerAsked: a place whose drive does not answer", () => {
  const places = { execPath: "/opt/app/local-ai", platform: "linux", pathEnv: "/mnt/share/bin:/usr/bin" };

  test("a configured llama.binary on a dead share is not found, saying why", async () => {
    const asked: (string | Buffer)[] = [];
    const found = await findLlamaServerAsked(cfg("/mnt/share/llama-server"), deadDrive(asked), places);
    expect(found).toEqual({
      tried: ["/mnt/share/llama-server"],
      late: "/mnt/share/llama-server: its drive did not answer within 0 s (a network drive offline?)",
    });
    expect(asked).toEqual(["/mnt/share/llama-server"]);
  });

  test("a dead PATH folder stops the lookup there: none after it is looked at", async () => {
    const asked: (string | Buffer)[] = [];
    const found = await findLlamaServerAsked(cfg(null), deadDrive(asked, ["/opt/app/llama-server"]), places);
    expect(found).toMatchObject({ late: expect.stringContaining("/mnt/share/bin/llama-server: its drive") });
    expect(asked).toEqual(["/mnt/share/bin/llama-server"]);
  });

  // binary_missing's data.tried (and its message) listed /usr/bin/llama-server too, a place
  // never looked at: the user was told llama-server is not there when it may well be.
  test("the places after a dead folder are not listed as tried", async () => {
    const found = await findLlamaServerAsked(cfg(null), deadDrive([], ["/opt/app/llama-server"]), places);
    expect(found).toMatchObject({ tried: ["/opt/app/llama-server", "/mnt/share/bin/llama-server"] });
  });

  test("one found before the dead folder is the answer, the dead folder never asked", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "llama-server"), "#!/bin/sh\n");
    chmodSync(join(dir.path, "llama-server"), 0o755);
    const asked: (string | Buffer)[] = [];
    const drive = deadDrive(asked, [join(dir.path, "llama-server")]);
    const before = { ...places, execPath: join(dir.path, "local-ai") };
    expect(await findLlamaServerAsked(cfg(null), drive, before)).toEqual({
      path: join(dir.path, "llama-server"),
    });
    expect(asked).toEqual([]);
  });
});
