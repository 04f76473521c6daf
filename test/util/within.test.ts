import { describe, expect, test } from "bun:test";
import { within } from "../../src/util/within.ts";

describe("within: a wait with a limit", () => {
  test("the work's value when it settles first", async () => {
    expect(await within(Promise.resolve("done"), 60_000, "late")).toBe("done");
  });

  test("`late` when the limit passes first; the work is left running", async () => {
    let finish: (v: string) => void = () => {};
    const work = new Promise<string>((r) => {
      finish = r;
    });
    expect(await within(work, 1, "late")).toBe("late");
    finish("done");
    expect(await work).toBe("done");
  });

  test("the work's failure, as it came", async () => {
    const failed = within(Promise.reject(new Error("boom")), 60_000, "late");
    await expect(failed).rejects.toThrow("boom");
  });
});
