import { describe, expect, test } from "bun:test";
import {
  canTransition,
  type StateKind,
  type SupervisorState,
  supervisorCell,
} from "../../src/runtime/supervisor-state.ts";

const KINDS: StateKind[] = ["stopped", "starting", "ready", "stopping", "closing", "closed"];

const VALID: [StateKind, StateKind][] = [
  ["stopped", "starting"],
  // A crash's error named once its lost RPC worker is found (rpc-watch.ts named).
  ["stopped", "stopped"],
  ["stopped", "closing"],
  ["starting", "ready"],
  ["starting", "stopped"],
  ["starting", "closing"],
  ["ready", "stopping"],
  ["ready", "stopped"],
  ["ready", "closing"],
  ["stopping", "stopped"],
  ["stopping", "closing"],
  ["closing", "closed"],
];

describe("supervisor state transitions", () => {
  test("exactly the listed transitions are valid; every other pair is refused", () => {
    const valid = new Set(VALID.map(([a, b]) => `${a}→${b}`));
    for (const from of KINDS) {
      for (const to of KINDS) {
        expect({ pair: `${from}→${to}`, ok: canTransition(from, to) }).toEqual({
          pair: `${from}→${to}`,
          ok: valid.has(`${from}→${to}`),
        });
      }
    }
  });

  test("refused examples: no ready without a start, no way back from closed", () => {
    expect(canTransition("stopped", "ready")).toBe(false);
    expect(canTransition("ready", "starting")).toBe(false);
    expect(canTransition("stopping", "starting")).toBe(false);
    expect(canTransition("closing", "stopped")).toBe(false);
    for (const to of KINDS) expect(canTransition("closed", to)).toBe(false);
  });

  test("swap moves from the state the caller holds", () => {
    const cell = supervisorCell();
    const stopped = cell.get();
    expect(stopped.kind).toBe("stopped");
    const closing: SupervisorState = { kind: "closing", done: Promise.resolve() };
    expect(cell.swap(stopped, closing)).toBe(true);
    expect(cell.get()).toBe(closing);
  });

  test("swap from a state that is no longer current is refused without a change (a lost race)", () => {
    const cell = supervisorCell();
    const stopped = cell.get();
    const closing: SupervisorState = { kind: "closing", done: Promise.resolve() };
    cell.swap(stopped, closing);
    // A job that still holds `stopped` (same kind, stale object) cannot act on it.
    expect(cell.swap(stopped, { kind: "closing", done: Promise.resolve() })).toBe(false);
    expect(cell.get()).toBe(closing);
    // Identity, not kind: another stopped object is not the current one either.
    const other = supervisorCell();
    expect(other.swap({ kind: "stopped" }, { kind: "closing", done: Promise.resolve() })).toBe(false);
  });

  test("an invalid transition from the current state throws (a bug, not a race)", () => {
    const cell = supervisorCell();
    const stopped = cell.get();
    expect(() => cell.swap(stopped, { kind: "closed" })).toThrow("invalid state transition stopped → closed");
    expect(cell.get()).toBe(stopped);
  });
});
