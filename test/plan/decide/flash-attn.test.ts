import { describe, expect, test } from "bun:test";
import { decideFlashAttn } from "../../../src/plan/decide/flash-attn.ts";
import { coreErrorOf } from "../../fixtures/core-error.ts";

describe("decideFlashAttn", () => {
  test("auto with an f16 V cache: llama-server decides", () => {
    const d = decideFlashAttn("auto", "f16");
    expect(d.value).toBe("auto");
    expect(d.decision).toMatchObject({ name: "flash_attn", source: "auto", flags: ["-fa", "auto"] });
  });

  test("a configured value is kept for a float V cache", () => {
    for (const fa of ["on", "off"] as const) {
      const d = decideFlashAttn(fa, "bf16");
      expect(d.value).toBe(fa);
      expect(d.decision).toMatchObject({ source: "config", reason: `llama.flash_attn: ${fa}` });
    }
  });

  test("a quantized V cache forces it on, saying why", () => {
    const d = decideFlashAttn("auto", "q4_0");
    expect(d.value).toBe("on");
    expect(d.decision).toMatchObject({ source: "config", flags: ["-fa", "on"] });
    expect(d.decision.reason).toContain("q4_0 V cache requires flash attention");
  });

  test("off with a quantized V cache is config_invalid naming llama.flash_attn", () => {
    const e = coreErrorOf(() => decideFlashAttn("off", "q8_0"));
    expect(e.code).toBe("config_invalid");
    expect(e.data?.key).toBe("llama.flash_attn");
    expect(e.message).toContain("llama.cache_type_v q8_0");
  });
});
