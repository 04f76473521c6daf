import { describe, expect, test } from "bun:test";
import { parseAnswer } from "../../src/agent/answer-json.ts";

describe("parseAnswer (a structured answer's JSON)", () => {
  test("an answer broken at an emoji is told as text: no half of the emoji in the message", () => {
    const out = parseAnswer('{"mood": 😀}');
    if (out.ok) throw new Error("parsed");
    expect(out.errors[0]?.message).toContain("not valid JSON");
    expect(out.errors[0]?.message.isWellFormed()).toBe(true);
  });

  test("a value, or why not", () => {
    expect(parseAnswer('{"n": 1.5e300}')).toEqual({ ok: true, value: { n: 1.5e300 } });
    expect(parseAnswer("  ")).toEqual({ ok: false, errors: [{ path: "", message: "the answer is empty" }] });
    expect(parseAnswer("{").ok).toBe(false);
  });

  test("a number beyond a double fails closed, each named by its path", () => {
    const parsed = parseAnswer('{"n": 1e400, "a/b": [0, -1e999], "ok": 1e-400}');
    expect(parsed).toEqual({
      ok: false,
      errors: [
        { path: "/a~1b/1", message: "the number is too large for a double (it would be Infinity)" },
        { path: "/n", message: "the number is too large for a double (it would be Infinity)" },
      ],
    });
    expect(parseAnswer("1e400")).toMatchObject({ ok: false, errors: [{ path: "" }] });
  });

  test("a deeply nested answer is walked without recursion", () => {
    const text = `${"[".repeat(5000)}1e400${"]".repeat(5000)}`;
    const parsed = parseAnswer(text);
    expect(parsed.ok).toBe(false);
  });
});
