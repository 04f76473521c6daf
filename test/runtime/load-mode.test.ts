import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { PLAN_DIALECT } from "../../src/plan/argv.ts";
import { dialectFor, probeLoadMode } from "../../src/runtime/load-mode.ts";
import { fakeLlamaKnobs, writeFakeLlamaServer } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

// llama.mmap / llama.mlock against three generations of llama-server: before --load-mode (the
// pair only), b10587 (both, the pair deprecated: help.txt) and later (commit de3ff81, built
// here: "error: invalid argument: --no-mmap").

describe("dialectFor", () => {
  test("the binary is asked only when the plan has memory flags; its answer picks the spelling", async () => {
    let asked = 0;
    const probe = async () => {
      asked++;
      return true;
    };
    expect(await dialectFor("/x", { mmap: true, mlock: false }, {}, probe)).toEqual(PLAN_DIALECT);
    expect(asked).toBe(0);
    expect(await dialectFor("/x", { mmap: false, mlock: false }, {}, probe)).toEqual({ memory: "load-mode" });
    expect(await dialectFor("/x", { mmap: true, mlock: true }, {}, probe)).toEqual({ memory: "load-mode" });
    expect(asked).toBe(2);
    // A build that does not list --load-mode keeps the pair.
    expect(await dialectFor("/x", { mmap: false, mlock: false }, {}, async () => false)).toEqual(
      PLAN_DIALECT,
    );
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
        plan: { mmap: false },
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
      plan: { mmap: false },
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
