import { expect, test } from "bun:test";
import { seqList } from "../../../src/agent/turn/rewrite.ts";

test("replace_from's error lists a few user-message seqs, not every one of a long session", () => {
  expect(seqList([])).toBe("none");
  expect(seqList([0, 2, 4])).toBe("0, 2, 4");
  const many = Array.from({ length: 5000 }, (_, i) => i * 2);
  expect(seqList(many)).toBe("0, 2, 4, 6, 8, …, 9990, 9992, 9994, 9996, 9998 (5000 in all)");
});
