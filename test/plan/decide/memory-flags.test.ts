import { describe, expect, test } from "bun:test";
import { decideMemoryFlags } from "../../../src/plan/decide/memory-flags.ts";

describe("decideMemoryFlags", () => {
  test("defaults (mmap, no mlock) add no flags", () => {
    const d = decideMemoryFlags({ mmap: true, mlock: false });
    expect(d.value).toEqual({ mmap: true, mlock: false });
    expect(d.decision).toMatchObject({ name: "mmap", source: "config", flags: [] });
    expect(d.decision.reason).toContain("memory-mapped");
  });

  test("each setting maps to its flag", () => {
    expect(decideMemoryFlags({ mmap: false, mlock: false }).decision.flags).toEqual(["--no-mmap"]);
    expect(decideMemoryFlags({ mmap: true, mlock: true }).decision.flags).toEqual(["--mlock"]);
    const both = decideMemoryFlags({ mmap: false, mlock: true }).decision;
    expect(both.flags).toEqual(["--no-mmap", "--mlock"]);
    expect(both.reason).toContain("private memory and locked");
  });
});
