import { describe, expect, test } from "bun:test";
import { SlotTable } from "../../../src/agent/kv/slot-table.ts";

describe("SlotTable (slot affinity, docs/agent.md#prompt-reuse)", () => {
  test("a session keeps its slot; a new one takes an empty slot before anyone's", () => {
    const t = new SlotTable(2);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    const b = t.take("u/b", 2)!;
    expect(b.slot).not.toBe(a.slot);
    expect(b).toMatchObject({ holds: false, evict: undefined });
    t.release(b.slot, "u/b", true, 2);
    expect(t.take("u/a", 3)).toEqual({ slot: a.slot, holds: true, evict: undefined });
  });

  test("with every slot held, the least recently used gives way, to be saved first if it changed", () => {
    const t = new SlotTable(2);
    for (const [k, at] of [
      ["u/a", 1],
      ["u/b", 2],
    ] as const) {
      const p = t.take(k, at)!;
      t.release(p.slot, k, true, at);
    }
    const c = t.take("u/c", 3)!;
    expect(c.evict).toBe("u/a");
    t.release(c.slot, "u/c", true, 3);
    // b was saved meanwhile (no longer dirty): it gives way without a save.
    t.slots.forEach((s) => {
      if (s.holder === "u/b") s.dirty = false;
    });
    expect(t.take("u/d", 4)).toMatchObject({ evict: undefined, holds: false });
  });

  test("busy slots are never taken; none free: no slot (llama-server picks, as before)", () => {
    const t = new SlotTable(1);
    expect(t.take("u/a", 1)).toBeDefined();
    expect(t.take("u/b", 2)).toBeUndefined();
    expect(t.idle()).toBe(false);
  });

  test("dirty lists the changed free slots; forget drops an erased session's claim", () => {
    const t = new SlotTable(2);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    const b = t.take("u/b", 2)!;
    t.release(b.slot, "u/b", false, 2);
    expect(t.dirty()).toEqual([{ slot: a.slot, holder: "u/a" }]);
    t.forget((h) => h === "u/a");
    expect(t.dirty()).toEqual([]);
    expect(t.take("u/c", 3)?.slot).toBe(a.slot);
  });
});
