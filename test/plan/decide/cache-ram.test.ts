import { describe, expect, test } from "bun:test";
import { CACHE_RAM_DEFAULT_MIB, decideCacheRam } from "../../../src/plan/decide/cache-ram.ts";

const MIB = 2 ** 20;
const GIB = 2 ** 30;

describe("decideCacheRam (--cache-ram, transcripts 94 and 94b)", () => {
  test("four conversations' worth of the KV cache when RAM has room for it", () => {
    const d = decideCacheRam({ ramLeftBytes: 16 * GIB, kvBytes: 512 * MIB });
    expect(d.value).toBe(2048);
    expect(d.decision).toMatchObject({ name: "cache_ram", flags: ["--cache-ram", "2048"] });
    expect(d.decision.reason).toContain("4 times the KV cache");
  });

  test("at most half of what the plan leaves free in RAM", () => {
    const d = decideCacheRam({ ramLeftBytes: 1 * GIB, kvBytes: 512 * MIB });
    expect(d.value).toBe(512);
    expect(d.decision.reason).toContain("half of the RAM");
  });

  test("never more than llama-server's own default, however much is free", () => {
    const d = decideCacheRam({ ramLeftBytes: 256 * GIB, kvBytes: 8 * GIB });
    expect(d.value).toBe(CACHE_RAM_DEFAULT_MIB);
  });

  test("nothing left: 0, said as off (still a flag, never the unplanned default)", () => {
    const d = decideCacheRam({ ramLeftBytes: -5 * MIB, kvBytes: 512 * MIB });
    expect(d.value).toBe(0);
    expect(d.decision.flags).toEqual(["--cache-ram", "0"]);
    expect(d.decision.reason).toContain("off");
  });

  test("a tiny KV cache still gets a MiB (llama-server counts in MiB)", () => {
    expect(decideCacheRam({ ramLeftBytes: GIB, kvBytes: 1024 }).value).toBe(1);
  });
});
