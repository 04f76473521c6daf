import { describe, expect, test } from "bun:test";
import { parseHfModelPath, parseModelRef, pullCommand } from "../../src/protocol/model-ref.ts";
import { PullParamsSchema } from "../../src/protocol/pull.ts";

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

describe("hostile references", () => {
  test("a backslash or control character in the file part is refused: a path that must stay inside the repo", () => {
    for (const ref of ["o/r:..\\..\\x.gguf", "o/r:a\\b.gguf", "o/r:a\u0001.gguf"])
      expect(() => parseModelRef(ref)).toThrow(/must stay inside the repo/);
  });

  test("a message quotes at most the reference's first 120 characters", () => {
    let message = "";
    try {
      parseModelRef(`owner/${"a".repeat(100_000)}`);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.length).toBeGreaterThan(0);
    expect(message.length).toBeLessThan(300);
    expect(message).toContain("…");
  });
});

describe("only GGUFs are pulled", () => {
  test("pull's file must name a .gguf, so its web-page refusal (download.ts) never meets a README", () => {
    // docs/models.md leans on this: a file answered as text/html is refused for every download.
    for (const file of ["README.md", "template.jinja", "config.json"]) {
      expect(PullParamsSchema.safeParse({ repo: "org/m", file }).success).toBe(false);
      // On the CLI it reads as a quantization, matched against the repo's GGUF names only.
      expect(parseModelRef(`org/m:${file}`)).not.toHaveProperty("file");
    }
    expect(PullParamsSchema.safeParse({ repo: "org/m", file: "sub/x.GGUF" }).success).toBe(true);
  });
});
