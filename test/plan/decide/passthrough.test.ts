import { describe, expect, test } from "bun:test";
import { extraArgsDecision, jinjaDecision } from "../../../src/plan/decide/passthrough.ts";

describe("fixed and passed-through flags", () => {
  test("--jinja always, for tool calling", () => {
    expect(jinjaDecision()).toMatchObject({ name: "jinja", value: true, source: "auto", flags: ["--jinja"] });
  });

  test("extra_args: none gives no line; some are passed through as given", () => {
    expect(extraArgsDecision([])).toBeNull();
    const d = extraArgsDecision(["--temp", "0.2"])!;
    expect(d).toMatchObject({ name: "extra_args", value: "--temp 0.2", source: "config" });
    expect(d.flags).toEqual(["--temp", "0.2"]);
  });
});
