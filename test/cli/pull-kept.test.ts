import { describe, expect, test } from "bun:test";
import { partialKept } from "../../src/cli/pull.ts";
import { CoreError } from "../../src/protocol/errors.ts";

// What `pull` says a stop left (docs/models.md "Cancel"): a partial to resume, or nothing yet.
describe("partialKept", () => {
  const at = (bytes_done?: number) =>
    new CoreError("cancelled", "stopped", bytes_done === undefined ? undefined : { bytes_done, total: 10 });

  test("nothing before any progress, or with a first part's body not begun", () => {
    expect(partialKept(0, at())).toBe(false);
    expect(partialKept(1, at(0))).toBe(false);
  });

  test("a first part with bytes, or stopped outside its body (waiting on another pull, checking)", () => {
    expect(partialKept(1, at(5))).toBe(true);
    expect(partialKept(1, at())).toBe(true);
  });

  test("a later part stopped before its first byte: the parts before it are whole, not 'before its download began'", () => {
    expect(partialKept(2, at(0))).toBe(true);
  });
});
