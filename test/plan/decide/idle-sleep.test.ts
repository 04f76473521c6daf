import { describe, expect, test } from "bun:test";
import { idleSleepDecision } from "../../../src/plan/decide/idle-sleep.ts";

describe("idleSleepDecision", () => {
  test("llama.idle_sleep_s becomes --sleep-idle-seconds (the real binary's flag, help.txt)", () => {
    const d = idleSleepDecision({ idle_sleep_s: 300 });
    expect(d).toMatchObject({ name: "idle_sleep", value: 300, source: "config" });
    expect(d.flags).toEqual(["--sleep-idle-seconds", "300"]);
    expect(d.reason).toContain("300 s");
  });

  test("0 leaves the flag out: llama-server's default never sleeps", () => {
    const d = idleSleepDecision({ idle_sleep_s: 0 });
    expect(d.flags).toEqual([]);
    expect(d.reason).toContain("stays loaded");
  });
});
