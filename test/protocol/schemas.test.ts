import { describe, expect, test } from "bun:test";
import { ChatParamsSchema, ChatResultSchema } from "../../src/protocol/chat.ts";
import { ErrorMessageSchema, EventMessageSchema, RequestSchema } from "../../src/protocol/messages.ts";
import { SafeIdSchema } from "../../src/protocol/safe-id.ts";

describe("protocol schemas", () => {
  test("a request needs an id (string or finite number) and a method; params are an object", () => {
    expect(RequestSchema.safeParse({ id: "a", method: "ping" }).success).toBe(true);
    expect(RequestSchema.safeParse({ id: 3, method: "ping", params: { x: 1 } }).success).toBe(true);
    expect(RequestSchema.safeParse({ id: null, method: "ping" }).success).toBe(false);
    expect(RequestSchema.safeParse({ id: Number.POSITIVE_INFINITY, method: "ping" }).success).toBe(false);
    expect(RequestSchema.safeParse({ id: 1, method: "" }).success).toBe(false);
    expect(RequestSchema.safeParse({ id: 1, method: "ping", params: [] }).success).toBe(false);
  });

  test("events keep their fields at the top level; errors carry a known code", () => {
    const ev = EventMessageSchema.parse({ id: 1, type: "event", event: "llm_chunk", step: 0, delta: "hi" });
    expect(ev).toMatchObject({ step: 0, delta: "hi" });
    expect(
      ErrorMessageSchema.safeParse({ id: null, type: "error", code: "invalid_json", message: "x" }).success,
    ).toBe(true);
    expect(ErrorMessageSchema.safeParse({ id: 1, type: "error", code: "oops", message: "x" }).success).toBe(
      false,
    );
  });

  test("user and session ids are safe path segments", () => {
    for (const ok of [
      "default_user",
      "a",
      "user@example.com",
      "x+y.z-1",
      "A".repeat(128),
      "con1",
      "console",
    ]) {
      expect({ ok, r: SafeIdSchema.safeParse(ok).success }).toEqual({ ok, r: true });
    }
    for (const bad of [
      "",
      ".hidden",
      "..",
      "../x",
      "a/b",
      "a\\b",
      "sp ace",
      "é",
      "A".repeat(129),
      "CON",
      "nul",
      "com1",
      "LPT9.txt",
      "nul.x2",
      "Aux",
    ]) {
      expect({ bad, r: SafeIdSchema.safeParse(bad).success }).toEqual({ bad, r: false });
    }
  });

  test("chat params default as docs/protocol.md#chat says", () => {
    expect(ChatParamsSchema.parse({})).toEqual({
      user_id: "default_user",
      input: "",
      resume: false,
      approve_execution: false,
      regenerate: false,
    });
    const issue = ChatParamsSchema.safeParse({ session_id: "../x" }).error?.issues[0];
    expect(issue?.path).toEqual(["session_id"]);
  });

  test("a chat result always says how many events were dropped", () => {
    const base = { response: "", session_id: "s", trace_id: "t", warnings: [], reasoning: "", usage: {} };
    expect(ChatResultSchema.safeParse(base).success).toBe(false);
    expect(ChatResultSchema.safeParse({ ...base, dropped_events: 0 }).success).toBe(true);
  });
});
