import { describe, expect, test } from "bun:test";
import { SlotUse } from "../../src/runtime/slot-use.ts";

const never = () => new AbortController().signal;

describe("SlotUse (slot affinity, docs/agent.md#prompt-reuse)", () => {
  test("a session keeps its slot; a new one takes an empty slot before anyone's", () => {
    const t = new SlotUse(2);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    const b = t.take("u/b", 2)!;
    expect(b.slot).not.toBe(a.slot);
    expect(b).toMatchObject({ holds: false, evict: undefined });
    t.release(b.slot, "u/b", true, 2);
    expect(t.take("u/a", 3)).toEqual({ slot: a.slot, holds: true, evict: undefined });
  });

  test("with every slot held, the least recently used gives way, to be saved first if it changed", () => {
    const t = new SlotUse(2);
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
    expect(t.beginSave(1 - c.slot, "u/b")).toBe(true);
    expect(t.take("u/d", 4)).toMatchObject({ evict: undefined, holds: false });
  });

  test("busy slots are never taken; none free: no slot (llama-server picks, as before)", () => {
    const t = new SlotUse(1);
    expect(t.take("u/a", 1)).toBeDefined();
    expect(t.take("u/b", 2)).toBeUndefined();
    expect(t.idle()).toBe(false);
  });

  test("dirty lists the changed free slots; forget drops an erased session's claim", () => {
    const t = new SlotUse(2);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    const b = t.take("u/b", 2)!;
    t.release(b.slot, "u/b", false, 2);
    expect(t.dirty()).toEqual([{ slot: a.slot, holder: "u/a" }]);
    t.forget((h) => h === "u/a");
    expect(t.dirty()).toEqual([]);
    expect(t.take("u/c", 3)?.slot).toBe(a.slot);
  });

  test("leases are counted once: idle only with none on it and no slot busy; leave never below zero", async () => {
    const t = new SlotUse(2);
    expect(t.idle()).toBe(true);
    await t.enter(never());
    expect(t.leases).toBe(1);
    expect(t.idle()).toBe(false);
    expect(t.leave()).toBe(true);
    expect(t.leave()).toBe(false);
    expect(t.leases).toBe(0);
  });

  test("a save is begun once per change, and a failed one leaves it changed while the slot still holds it", () => {
    const t = new SlotUse(1);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    expect(t.beginSave(a.slot, "u/b")).toBe(false);
    expect(t.beginSave(a.slot, "u/a")).toBe(true);
    expect(t.beginSave(a.slot, "u/a")).toBe(false);
    t.saveFailed(a.slot, "u/a");
    expect(t.dirty()).toEqual([{ slot: a.slot, holder: "u/a" }]);
    t.handTo(a.slot, "u/c");
    t.saveFailed(a.slot, "u/a");
    expect(t.dirty()).toEqual([]);
    expect(t.holderOf(a.slot)).toBe("u/c");
  });

  test("a slot handed over holds the prior's tokens until a request of the taker is taken up: never saved as the taker's", () => {
    const t = new SlotUse(1);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    expect(t.beginSave(a.slot, "u/a")).toBe(true);
    const b = t.take("u/b", 2)!;
    t.handTo(b.slot, "u/b");
    // Sent, refused before llama-server started it: a's tokens are still there.
    t.release(b.slot, "u/b", true, 2, false);
    expect(t.dirty()).toEqual([]);
    expect(t.forget((h) => h === "u/a")).toEqual([b.slot]);
    // Handed on again, the tokens are still a's; once c's own state is restored, they are c's.
    t.take("u/c", 3);
    t.handTo(b.slot, "u/c");
    t.restored(b.slot);
    t.release(b.slot, "u/c", false, 3);
    expect(t.forget((h) => h === "u/a")).toEqual([]);
    t.take("u/b", 3);
    t.handTo(b.slot, "u/b");
    expect(t.forget((h) => h === "u/c")).toEqual([b.slot]);
    t.release(b.slot, "u/b", false, 3);
    // Taken up: the slot is b's own now, and changed.
    t.take("u/b", 3);
    t.release(b.slot, "u/b", true, 3, true);
    expect(t.dirty()).toEqual([{ slot: b.slot, holder: "u/b" }]);
  });

  test("an edit's erase (not holders) empties only the slots another session took unread from it", () => {
    const t = new SlotUse(2);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    const b = t.take("u/b", 2)!;
    t.handTo(b.slot, "u/b");
    t.release(b.slot, "u/b", true, 2);
    // c takes a's slot (the least recently used), its request never taken up: a's tokens stay there.
    const c = t.take("u/c", 3)!;
    expect(c.slot).toBe(a.slot);
    t.handTo(c.slot, "u/c");
    t.release(c.slot, "u/c", true, 3, false);
    // a's edit in b's slot: that slot holds the edited prompt and stays a's.
    const e = t.take("u/a", 4)!;
    t.handTo(e.slot, "u/a");
    t.release(e.slot, "u/a", true, 4, true);
    expect(t.forget((h) => h === "u/a", false)).toEqual([c.slot]);
    expect(t.holderOf(e.slot)).toBe("u/a");
    expect(t.holderOf(c.slot)).toBe("u/c");
    expect(t.forget((h) => h === "u/a", false)).toEqual([]);
  });

  test("a slot a turn of its own session has taken is not saved quietly; the taker saves the one it evicts", () => {
    const t = new SlotUse(1);
    const a = t.take("u/a", 1)!;
    t.release(a.slot, "u/a", true, 1);
    // The quiet save listed it, then a's next turn took it before that save came to it.
    expect(t.dirty()).toEqual([{ slot: a.slot, holder: "u/a" }]);
    expect(t.take("u/a", 2)).toMatchObject({ holds: true });
    expect(t.beginSave(a.slot, "u/a")).toBe(false);
    t.release(a.slot, "u/a", true, 3);
    const b = t.take("u/b", 4)!;
    expect(b.evict).toBe("u/a");
    expect(t.beginSave(b.slot, "u/a", true)).toBe(true);
  });

  test("an abandoned take frees the slot; work on a slot is tracked until it settles", async () => {
    const t = new SlotUse(1);
    const a = t.take("u/a", 1)!;
    expect(t.take("u/b", 2)).toBeUndefined();
    t.abandon(a.slot);
    expect(t.idle()).toBe(true);
    const done = Promise.withResolvers<void>();
    t.working(0, done.promise);
    expect(t.workOn(0)).toBeDefined();
    done.resolve();
    await t.workOn(0);
    expect(t.workOn(0)).toBeUndefined();
  });

  test("emptied (an idle sleep): no holder, nothing to save, leases and busy slots kept", async () => {
    const t = new SlotUse(2);
    await t.enter(never());
    const a = t.take("u/a", 1)!;
    const b = t.take("u/b", 1)!;
    t.release(b.slot, "u/b", true, 1);
    t.emptied();
    expect(t.dirty()).toEqual([]);
    expect(t.holderOf(b.slot)).toBeUndefined();
    expect(t.leases).toBe(1);
    expect(t.take("u/c", 2)?.slot).toBe(b.slot);
    expect(t.take("u/d", 2)).toBeUndefined();
    expect(a.slot).not.toBe(b.slot);
  });

  // A restore that did not answer may still be queued in llama-server (b10587 runs a deferred slot
  // action after a later one): the delete's own erase can run before it, and it then loads the
  // deleted session's tokens into the slot. Cleared by that erase, the slot counted empty, the next
  // session's request handed them to the RAM cache: the next check (a take) empties it again.
  test("a session a late restore may load is still held after its delete's erase, till the next", () => {
    const t = new SlotUse(1);
    const a = t.take("u/a", 1)!;
    t.handTo(a.slot, "u/a");
    t.cleared(a.slot); // the restore cancelled: an erase queued behind it
    t.mayHold(a.slot, "u/a");
    t.abandon(a.slot);
    expect(t.forget((h) => h === "u/a")).toEqual([a.slot]); // sessions.delete: an erase sent
    expect(t.sessionsIn(a.slot)).toEqual(["u/a"]);
    expect(t.forget((h) => h === "u/a")).toEqual([a.slot]); // another session takes it: checked, erased
    expect(t.sessionsIn(a.slot)).toEqual([]);
    const b = t.take("u/b", 2)!;
    t.handTo(b.slot, "u/b");
    t.release(b.slot, "u/b", true, 3);
    expect(t.sessionsIn(b.slot)).toEqual(["u/b"]);
  });

  test("leases wait in line for a slot, first come first served; a server gone answers the line", async () => {
    const t = new SlotUse(1);
    await t.enter(never());
    const order: string[] = [];
    const b = t.enter(never()).then(() => order.push("b"));
    const c = t.enter(never()).then(() => order.push("c"));
    expect(t.waiting).toBe(2);
    t.leave();
    await b;
    expect(t.leases).toBe(1);
    t.leave();
    await c;
    expect(order).toEqual(["b", "c"]);
    const d = t.enter(never());
    t.failWaiters(new Error("gone"));
    await expect(d).rejects.toThrow("gone");
    expect(t.leases).toBe(1);
    const cancel = new AbortController();
    const e = t.enter(cancel.signal);
    cancel.abort(new Error("cancelled"));
    await expect(e).rejects.toThrow("cancelled");
    expect(t.waiting).toBe(0);
  });
});
