import { describe, expect, test } from "bun:test";
import { parseHfModelPath, parseModelRef, pullCommand } from "../../src/protocol/model-ref.ts";

describe("model references", () => {
  test("repo, quant, file and the hf: prefix", () => {
    expect(parseModelRef("org/m")).toEqual({ repo: "org/m", revision: "main" });
    expect(parseModelRef("org/m:Q4_K_M")).toEqual({ repo: "org/m", quant: "Q4_K_M", revision: "main" });
    expect(parseModelRef("org/m:sub/x.GGUF", "v1")).toEqual({
      repo: "org/m",
      file: "sub/x.GGUF",
      revision: "v1",
    });
    expect(parseHfModelPath("hf:org/m:q8_0")).toEqual({ repo: "org/m", quant: "q8_0", revision: "main" });
    expect(parseHfModelPath("./models/m.gguf")).toBeUndefined();
    expect(pullCommand({ repo: "org/m", quant: "Q4_K_M", revision: "main" })).toBe(
      "local-ai pull org/m:Q4_K_M",
    );
  });

  test("bad references name what is wrong", () => {
    expect(() => parseModelRef("justaname")).toThrow("org/name");
    expect(() => parseModelRef("org/m:")).toThrow("nothing after");
    expect(() => parseModelRef("org/m:../../x.gguf")).toThrow("inside the repo");
    expect(() => parseModelRef("org/a--b")).toThrow("org/name");
    expect(() => parseModelRef("org/m:Q4 K")).toThrow("neither");
  });
});
