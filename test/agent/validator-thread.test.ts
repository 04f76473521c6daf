import { describe, expect, test } from "bun:test";
import { SHOWN_ANSWER_ERRORS } from "../../src/agent/json-validator.ts";
import { askValidator } from "../../src/agent/validator-thread.ts";

// The validator's thread hands the core's loop what output_invalid shows, not every error: an
// answer of many failing items is as many errors, each an object the loop would take off the
// thread (structured clone) before throwing all but the first few away.

describe("validator thread", () => {
  test("an answer of 50,000 failing items comes back as the first errors and their count", async () => {
    const schema = JSON.stringify({ type: "array", items: { type: "string" } });
    const text = `[${Array(50_000).fill("1").join(",")}]`;
    const answer = await askValidator(schema, text, 30_000);
    expect(answer.kind).toBe("checked");
    if (answer.kind !== "checked") return;
    expect(answer.errors).toHaveLength(SHOWN_ANSWER_ERRORS);
    expect(answer.errors[1]).toEqual({ path: "/1", message: "must be string" });
    expect(answer.total).toBe(50_000);
  });
});
