import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { compileError, hostTarget, TARGETS } from "../../scripts/compile.ts";
import { targetName } from "../../scripts/release.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const ROOT = join(import.meta.dir, "../..");

describe("build targets", () => {
  test("five targets named <os>-<arch>; every x64 one is built on Bun's baseline runtime", () => {
    expect(TARGETS.map(targetName)).toEqual([
      "linux-x64",
      "linux-arm64",
      "darwin-x64",
      "darwin-arm64",
      "windows-x64",
    ]);
    for (const t of TARGETS) {
      expect(t.bun as string).toBe(`bun-${t.os}-${t.arch}${t.arch === "x64" ? "-baseline" : ""}`);
    }
    // The host build (tests, dist/local-ai) is the shipped target, not a faster local variant.
    expect(TARGETS).toContain(hostTarget());
  });

  test("a compile error says what failed; a failed runtime download says how to get it", () => {
    const plain = compileError("bun-linux-arm64", new AggregateError([new Error("Could not resolve: x")]));
    expect(plain.message).toBe("cannot build for bun-linux-arm64: Could not resolve: x");
    const offline = compileError(
      "bun-windows-x64-baseline",
      new AggregateError([
        new Error("Failed to download 'bun-windows-x64-baseline-v1.4.5': ConnectionRefused"),
      ]),
    );
    expect(offline.message).toContain("Failed to download");
    expect(offline.message).toContain("npm registry");
    expect(offline.message).toContain("No other runtime is used in its place");
  });

  test("without the baseline runtime at hand the build fails and writes nothing", async () => {
    await using dir = tmpdir();
    const cache = join(dir.path, "empty-cache");
    mkdirSync(cache);
    const outfile = join(dir.path, "local-ai");
    // An empty install cache and an unreachable proxy: Bun cannot fetch the runtime.
    const run = Bun.spawnSync(
      [
        process.execPath,
        "-e",
        `import { compile } from ${JSON.stringify(join(ROOT, "scripts/compile.ts"))};
         await compile({ bun: "bun-linux-x64-baseline" }, ${JSON.stringify(outfile)});`,
      ],
      {
        env: {
          ...process.env,
          BUN_INSTALL_CACHE_DIR: cache,
          HTTPS_PROXY: "http://127.0.0.1:9",
          https_proxy: "http://127.0.0.1:9",
          HTTP_PROXY: "http://127.0.0.1:9",
          http_proxy: "http://127.0.0.1:9",
          NO_PROXY: "",
          no_proxy: "",
        },
        stdout: "pipe",
        stderr: "pipe",
        timeout: 60_000,
      },
    );
    expect(run.exitCode).not.toBe(0);
    expect(run.stderr.toString()).toContain("cannot build for bun-linux-x64-baseline");
    expect(run.stderr.toString()).toContain("No other runtime is used in its place");
    expect(existsSync(outfile)).toBe(false);
  }, 90_000);
});
