import { describe, expect, test } from "bun:test";
import { canTransition, type ServerState, serverCell } from "../../src/agent/mcp/server-state.ts";

describe("an MCP server's state", () => {
  test("the transitions that exist: closed is terminal, and a failed start is only left by a new start or close", () => {
    expect(canTransition("idle", "starting")).toBe(true);
    expect(canTransition("starting", "ready")).toBe(true);
    expect(canTransition("starting", "failed")).toBe(true);
    expect(canTransition("ready", "idle")).toBe(true);
    expect(canTransition("failed", "starting")).toBe(true);
    expect(canTransition("ready", "draining")).toBe(true);
    expect(canTransition("draining", "idle")).toBe(true);
    // A draining server is not used again: it is gone before its next start.
    expect(canTransition("draining", "ready")).toBe(false);
    expect(canTransition("draining", "starting")).toBe(false);
    for (const from of ["idle", "starting", "ready", "draining", "failed"] as const)
      expect(canTransition(from, "closed")).toBe(true);
    for (const to of ["idle", "starting", "ready", "draining", "failed", "closed"] as const)
      expect(canTransition("closed", to)).toBe(false);
    expect(canTransition("idle", "ready")).toBe(false);
    expect(canTransition("failed", "ready")).toBe(false);
    expect(canTransition("ready", "starting")).toBe(false);
  });

  test("swap is a compare-and-set: a stale expected state is refused, a transition the table lacks throws", () => {
    const cell = serverCell("t");
    const idle = cell.get();
    const starting: ServerState = {
      kind: "starting",
      abort: new AbortController(),
      outcome: new Promise(() => {}),
    };
    expect(cell.swap(idle, starting)).toBe(true);
    expect(cell.get()).toBe(starting);
    // A second user that read `idle` before the swap lost the race.
    expect(cell.swap(idle, { kind: "closed" })).toBe(false);
    expect(cell.get()).toBe(starting);
    expect(() => cell.swap(starting, { kind: "idle" })).toThrow("invalid state transition starting → idle");
    expect(cell.swap(starting, { kind: "closed" })).toBe(true);
    expect(() => cell.swap(cell.get(), { kind: "idle" })).toThrow("closed → idle");
  });
});
