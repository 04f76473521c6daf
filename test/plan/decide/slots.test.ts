import { describe, expect, test } from "bun:test";
import { decideSlots } from "../../../src/plan/decide/slots.ts";

describe("decideSlots", () => {
  test("auto: one slot, so one chat gets the whole context", () => {
    const d = decideSlots({ llama: { parallel: "auto" }, app: { max_parallel_chats: "auto" } });
    expect(d.value).toBe(1);
    expect(d.decision).toMatchObject({ name: "slots", value: 1, source: "auto", flags: ["-np", "1"] });
    expect(d.decision.reason).toContain("llama.parallel");
  });

  test("llama.parallel wins over app.max_parallel_chats", () => {
    const d = decideSlots({ llama: { parallel: 3 }, app: { max_parallel_chats: 5 } });
    expect(d.value).toBe(3);
    expect(d.decision).toMatchObject({ source: "config", flags: ["-np", "3"] });
    expect(d.decision.reason).toStartWith("llama.parallel: 3 chats");
  });

  test("app.max_parallel_chats gives one slot per chat", () => {
    const d = decideSlots({ llama: { parallel: "auto" }, app: { max_parallel_chats: 2 } });
    expect(d.value).toBe(2);
    expect(d.decision).toMatchObject({ source: "config", flags: ["-np", "2"] });
    expect(d.decision.reason).toStartWith("app.max_parallel_chats");
  });
});
