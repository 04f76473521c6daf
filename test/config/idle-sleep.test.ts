import { describe, expect, test } from "bun:test";
import { parseConfigText } from "../../src/config/load.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";

// llama.idle_sleep_s (issue 11 item 2): whole seconds, 0 disables, bounded like every timer.
describe("llama.idle_sleep_s", () => {
  const parse = (v: unknown) => parseConfigText(`llama:\n  idle_sleep_s: ${v}\n`, "/c/config.yaml");

  test("defaults to 300 s; 0 (never) and the timer's limit are accepted", () => {
    expect(parseConfigText("", "/c/config.yaml").config.llama.idle_sleep_s).toBe(300);
    expect(parse(0).config.llama.idle_sleep_s).toBe(0);
    expect(parse(2147483).config.llama.idle_sleep_s).toBe(2147483);
  });

  test.each([
    ["negative", -1],
    ["absurd (past what a timer can wait)", 2147484],
    ["not whole seconds", 1.5],
    ["not a number", '"soon"'],
  ])("%s → config_invalid naming the key", (_why, value) => {
    const err = coreErrorOf(() => parse(value));
    expect(err.code).toBe("config_invalid");
    expect(err.data!.key).toBe("llama.idle_sleep_s");
    expect(err.message).toContain("llama.idle_sleep_s");
  });
});
