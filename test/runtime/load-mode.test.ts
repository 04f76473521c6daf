import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { launchArgv, probeLoadMode, toLoadMode, usesLegacyMemoryFlags } from "../../src/runtime/load-mode.ts";
import { fakeLlamaKnobs, writeFakeLlamaServer } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

// llama.mmap / llama.mlock against three generations of llama-server: before --load-mode (the
// pair only), b10587 (both, the pair deprecated: help.txt) and later (commit de3ff81, built
// here: "error: invalid argument: --no-mmap").

describe("toLoadMode", () => {
  test("each combination of the pair is the one mode that means the same", () => {
    const base = ["-m", "m.gguf", "-c", "512"];
    expect(toLoadMode([...base, "--no-mmap"])).toEqual([...base, "--load-mode", "none"]);
    expect(toLoadMode([...base, "--no-mmap", "--mlock"])).toEqual([...base, "--load-mode", "mlock"]);
    expect(toLoadMode([...base, "--mlock"])).toEqual([...base, "--load-mode", "mmap+mlock"]);
    expect(toLoadMode(base)).toEqual(base);
    expect(usesLegacyMemoryFlags(base)).toBe(false);
  });

  test("the binary is asked only when the plan has one of the pair", async () => {
    let asked = 0;
    const probe = async () => {
      asked++;
      return true;
    };
    expect(await launchArgv("/x", ["-m", "m"], {}, probe)).toEqual(["-m", "m"]);
    expect(asked).toBe(0);
    expect(await launchArgv("/x", ["--no-mmap"], {}, probe)).toEqual(["--load-mode", "none"]);
    // A build that does not list --load-mode keeps the pair.
    expect(await launchArgv("/x", ["--no-mmap"], {}, async () => false)).toEqual(["--no-mmap"]);
    expect(asked).toBe(1);
  });
});

describe.skipIf(process.platform === "win32")("against the stand-in", () => {
  test("--help is read once per binary file", async () => {
    await using dir = tmpdir();
    const log = join(dir.path, "argv.txt");
    const binary = writeFakeLlamaServer(dir.path, fakeLlamaKnobs({ FAKE_LLAMA_ARGV_LOG: log }));
    expect(await probeLoadMode(binary, process.env)).toBe(true);
    expect(readFileSync(log, "utf8")).toBe("--help");
    rmSync(log);
    expect(await probeLoadMode(binary, process.env)).toBe(true);
    expect(existsSync(log)).toBe(false);
    expect(await probeLoadMode(join(dir.path, "missing"), process.env)).toBe(false);
  });

  for (const [build, knobs] of [
    ["a build that dropped --no-mmap", { FAKE_LLAMA_LOAD_MODE_ONLY: "1" }],
    ["b10587, which takes both", {}],
  ] as const)
    test(`${build}: llama.mmap false starts with --load-mode none`, async () => {
      await using dir = tmpdir();
      const log = join(dir.path, "argv.txt");
      const { supervisor } = makeSupervisor(dir.path, {
        env: { ...knobs, FAKE_LLAMA_ARGV_LOG: log },
        extraArgs: ["--no-mmap"],
      });
      try {
        const lease = await supervisor.acquire(new AbortController().signal);
        lease.release();
        const args = readFileSync(log, "utf8").split("\n");
        expect(args).not.toContain("--no-mmap");
        expect(args.join(" ")).toContain("--load-mode none");
      } finally {
        await supervisor.stop();
      }
    });

  test("without the translation, the newer build refuses the pair (why it exists)", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_LOAD_MODE_ONLY: "1" },
      extraArgs: ["--no-mmap"],
      options: { loadMode: async () => false },
    });
    try {
      const err = await supervisor.acquire(new AbortController().signal).catch((e) => e);
      expect(String(err?.message)).toContain("--no-mmap");
    } finally {
      await supervisor.stop();
    }
  });
});
