import { describe, expect, test } from "bun:test";
import { architectureOf, hyperparams } from "../../src/plan/model-metadata.ts";

describe("model metadata", () => {
  test("the architecture, or unknown", () => {
    expect(architectureOf({ "general.architecture": "qwen3" })).toBe("qwen3");
    expect(architectureOf({ "general.architecture": 3 })).toBe("unknown");
    expect(architectureOf({})).toBe("unknown");
  });

  test("keys are read under the architecture's prefix; arrays count as their largest entry", () => {
    const hp = hyperparams(
      {
        "llama.block_count": 4,
        "llama.attention.head_count_kv": [2, 8, 4, 4],
        "llama.attention.empty": [],
        "llama.rope.name": "yarn",
        block_count: 99,
      },
      "llama",
    );
    expect(hp.num("block_count")).toBe(4);
    expect(hp.num("attention.head_count_kv")).toBe(8);
    expect(hp.num("attention.empty")).toBeUndefined();
    expect(hp.num("rope.name")).toBeUndefined();
    expect(hp.num("absent")).toBeUndefined();
  });

  test("per layer: an array's entry for that layer, or the one number all layers share", () => {
    const hp = hyperparams({ "a.kv": [2, 8], "a.heads": 16 }, "a");
    expect(hp.perLayer("kv", 1)).toBe(8);
    expect(hp.perLayer("kv", 5)).toBeUndefined();
    expect(hp.perLayer("heads", 5)).toBe(16);
    expect(hp.raw("kv")).toEqual([2, 8]);
  });
});
