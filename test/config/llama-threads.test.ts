import { describe, expect, test } from "bun:test";
import { parseConfigText } from "../../src/config/load.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";

// llama.threads went to llama-server unchanged: ggml has no bound past GGML_MAX_N_THREADS (512,
// ggml.h) and creates one thread per count, aborting (GGML_ASSERT) once the system refuses one.
describe("llama.threads", () => {
  const parse = (v: unknown) => parseConfigText(`llama:\n  threads: ${v}\n`, "/c/config.yaml");

  test("auto by default; 1 and ggml's most (512) are accepted", () => {
    expect(parseConfigText("", "/c/config.yaml").config.llama.threads).toBe("auto");
    expect(parse(1).config.llama.threads).toBe(1);
    expect(parse(512).config.llama.threads).toBe(512);
  });

  test.each([513, 1000000])("%d → config_invalid naming the key and the most", (value) => {
    const err = coreErrorOf(() => parse(value));
    expect(err.code).toBe("config_invalid");
    expect(err.data!.key).toBe("llama.threads");
    expect(err.message).toContain("at most 512");
  });
});
