import { describe, expect, test } from "bun:test";
import { renderModels } from "../../src/cli/models.ts";
import { leftOutOf } from "../../src/models/list.ts";
import { LEFT_OUT_MAX, type LeftOut, ModelsResultSchema } from "../../src/protocol/models.ts";

// A cache of thousands of repos behind a share gone offline (each a `models--*` link onto it)
// left out thousands of paths: the result carried them all and `local-ai models` printed a line
// each, the models scrolled away (docs/models.md "What was left out": capped, with a total).

const dead = (n: number): LeftOut[] =>
  Array.from({ length: n }, (_, i) => ({
    path: `/nas/models--o--m${String(i).padStart(5, "0")}`,
    reason: "no_answer",
  }));

describe("models: what was left out is bounded", () => {
  test("the result lists at most LEFT_OUT_MAX paths, and left_out_total says how many in all", () => {
    const part = leftOutOf(dead(5000));
    expect(part.left_out).toHaveLength(LEFT_OUT_MAX);
    expect(part.left_out_total).toBe(5000);
    expect(part.left_out?.[0]?.path).toBe("/nas/models--o--m00000");
    const result = { models: [], cache_dir: "/nas", folders: ["/m"], ...part };
    expect(ModelsResultSchema.safeParse(result).success).toBe(true);
  });

  test("each path once, counted once; nothing left out gives neither field", () => {
    const twice = [...dead(3), ...dead(3)];
    expect(leftOutOf(twice)).toEqual({ left_out: dead(3), left_out_total: 3 });
    expect(leftOutOf([])).toEqual({});
  });

  test("the CLI prints a bounded number of lines and a count of the rest", () => {
    const part = leftOutOf(dead(5000));
    const text = renderModels({ models: [], cache_dir: "/nas", folders: ["/m"], ...part }, false);
    const lines = text.split("\n").filter((l) => l.startsWith("!"));
    expect(lines.length).toBeLessThanOrEqual(21);
    expect(lines.at(-1)).toContain("4980 more");
    expect(text.split("\n").length).toBeLessThan(30);
  });
});
