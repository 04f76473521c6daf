import { describe, expect, test } from "bun:test";
import { decideThreads } from "../../../src/plan/decide/threads.ts";

describe("decideThreads", () => {
  test("auto: one per physical core", () => {
    const d = decideThreads("auto", { logical: 16, physical: 8 });
    expect(d.value).toBe(8);
    expect(d.decision).toMatchObject({ name: "threads", source: "auto", flags: ["-t", "8"] });
    expect(d.decision.reason).toContain("physical core (8)");
  });

  test("auto with physical cores unknown: one per logical core", () => {
    const d = decideThreads("auto", { logical: 6, physical: null });
    expect(d.value).toBe(6);
    expect(d.decision.reason).toContain("logical core (6)");
  });

  test("never fewer than one", () => {
    expect(decideThreads("auto", { logical: 0, physical: null }).value).toBe(1);
  });

  test("llama.threads as given", () => {
    const d = decideThreads(3, { logical: 16, physical: 8 });
    expect(d.value).toBe(3);
    expect(d.decision).toMatchObject({ source: "config", flags: ["-t", "3"], reason: "llama.threads" });
  });
});
