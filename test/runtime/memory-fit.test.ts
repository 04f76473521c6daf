import { describe, expect, test } from "bun:test";
import { decideFit, type HeldModel, heldBytes } from "../../src/runtime/memory-fit.ts";

const GIB = 1024 ** 3;

/** An idle, unpinned model holding `gib` GiB on gpu0, last used at `at`. */
function m(name: string, gib: number, at: number, over: Partial<HeldModel> = {}): HeldModel {
  return { name, bytes: { gpu0: gib * GIB }, busy: false, pinned: false, lastUsedAt: at, ...over };
}

const budget = { gpu0: 10 * GIB, cpu: 32 * GIB };
const ask = (gib: number, name = "asked") => ({ name, bytes: { gpu0: gib * GIB } });

describe("decideFit: one device", () => {
  test("fits beside what is loaded", () => {
    expect(decideFit([m("a", 4, 1)], budget, ask(6))).toEqual({ kind: "fits" });
  });

  test("fits with nothing loaded, exactly at the budget", () => {
    expect(decideFit([], budget, ask(10))).toEqual({ kind: "fits" });
  });

  test("more than the whole budget: never, naming the device", () => {
    expect(decideFit([], budget, ask(11))).toEqual({
      kind: "never",
      devices: [{ device: "gpu0", needed_bytes: 11 * GIB, budget_bytes: 10 * GIB }],
    });
  });

  test("a device the budget does not name has none", () => {
    const d = decideFit([], budget, { name: "x", bytes: { rpc0: 1 } });
    expect(d).toEqual({ kind: "never", devices: [{ device: "rpc0", needed_bytes: 1, budget_bytes: 0 }] });
  });

  test("the least recently used idle model is unloaded first", () => {
    const held = [m("new", 3, 30), m("old", 3, 10), m("mid", 3, 20)];
    expect(decideFit(held, budget, ask(3))).toEqual({ kind: "evict", models: ["old"] });
  });

  test("as many as it takes, in LRU order", () => {
    const held = [m("new", 3, 30), m("old", 3, 10), m("mid", 3, 20)];
    expect(decideFit(held, budget, ask(7))).toEqual({ kind: "evict", models: ["old", "mid"] });
  });

  test("the fewest: a small LRU model that a larger one makes unnecessary is kept", () => {
    // old (1 GiB) alone is not enough; old + mid is; then mid alone is enough, so old stays.
    const held = [m("old", 1, 10), m("mid", 6, 20), m("new", 2, 30)];
    expect(decideFit(held, budget, ask(7))).toEqual({ kind: "evict", models: ["mid"] });
  });

  test("a busy model is never chosen", () => {
    const held = [m("old", 4, 10, { busy: true }), m("mid", 4, 20)];
    expect(decideFit(held, budget, ask(5))).toEqual({ kind: "evict", models: ["mid"] });
  });

  test("a pinned model is never chosen", () => {
    const held = [m("old", 4, 10, { pinned: true }), m("mid", 4, 20)];
    expect(decideFit(held, budget, ask(5))).toEqual({ kind: "evict", models: ["mid"] });
  });

  test("the model asked for is never chosen", () => {
    const held = [m("asked", 4, 1), m("mid", 4, 20)];
    expect(decideFit(held, budget, ask(5))).toEqual({ kind: "evict", models: ["mid"] });
  });

  test("nothing can be unloaded: wait, naming the models that hold the memory", () => {
    const held = [m("busy", 4, 10, { busy: true }), m("pin", 4, 20, { pinned: true })];
    expect(decideFit(held, budget, ask(5))).toEqual({ kind: "wait", holders: ["busy", "pin"] });
  });

  test("unloading every idle model is still not enough: wait, and unload nothing", () => {
    const held = [m("idle", 2, 10), m("busy", 6, 20, { busy: true })];
    expect(decideFit(held, budget, ask(5))).toEqual({ kind: "wait", holders: ["busy"] });
  });

  test("by memory, never by count: many small models stay beside a large one", () => {
    const held = [m("a", 1, 1), m("b", 1, 2), m("c", 1, 3), m("d", 1, 4)];
    expect(decideFit(held, budget, ask(6))).toEqual({ kind: "fits" });
  });

  test("the same last use: by name, so the choice is stable", () => {
    expect(decideFit([m("b", 4, 5), m("a", 4, 5)], budget, ask(5))).toEqual({ kind: "evict", models: ["a"] });
  });
});

describe("decideFit: several devices", () => {
  const two = (
    name: string,
    gpu: number,
    cpu: number,
    at: number,
    over: Partial<HeldModel> = {},
  ): HeldModel => ({
    ...m(name, 0, at, over),
    bytes: { gpu0: gpu * GIB, cpu: cpu * GIB },
  });

  test("short on one device only: a model holding nothing there frees nothing and stays", () => {
    const held = [two("cpuOnly", 0, 20, 1), two("gpuModel", 6, 1, 2)];
    const d = decideFit(held, budget, { name: "x", bytes: { gpu0: 6 * GIB, cpu: 2 * GIB } });
    expect(d).toEqual({ kind: "evict", models: ["gpuModel"] });
  });

  test("it must fit on every device it uses", () => {
    const held = [two("a", 2, 20, 1), two("b", 2, 10, 2)];
    // gpu0 fits beside both; cpu needs both gone (30 + 4 > 32, 10 + 4 ≤ 32 needs a gone).
    const d = decideFit(held, budget, { name: "x", bytes: { gpu0: 2 * GIB, cpu: 4 * GIB } });
    expect(d).toEqual({ kind: "evict", models: ["a"] });
  });

  test("a device the asked model does not use is never short for it", () => {
    const held = [{ ...m("full", 0, 1), bytes: { cpu: 40 * GIB } }];
    expect(decideFit(held, budget, ask(5))).toEqual({ kind: "fits" });
  });

  test("never names every device it overruns", () => {
    const d = decideFit([], budget, { name: "x", bytes: { gpu0: 11 * GIB, cpu: 33 * GIB } });
    expect(d.kind === "never" && d.devices.map((x) => x.device)).toEqual(["gpu0", "cpu"]);
  });

  test("RPC devices are held against their own budget, by id", () => {
    const b = { ...budget, rpc0: 8 * GIB };
    const held = [{ ...m("remote", 0, 1), bytes: { rpc0: 5 * GIB } }];
    expect(decideFit(held, b, { name: "x", bytes: { rpc0: 4 * GIB } })).toEqual({
      kind: "evict",
      models: ["remote"],
    });
    expect(decideFit(held, b, { name: "x", bytes: { rpc0: 3 * GIB } })).toEqual({ kind: "fits" });
  });

  test("waiting names only the models on the short device", () => {
    const held = [two("onGpu", 8, 0, 1, { busy: true }), two("onCpu", 0, 8, 2, { busy: true })];
    const d = decideFit(held, budget, { name: "x", bytes: { gpu0: 4 * GIB, cpu: 1 * GIB } });
    expect(d).toEqual({ kind: "wait", holders: ["onGpu"] });
  });
});

describe("heldBytes", () => {
  test("heldBytes sums per device", () => {
    expect(heldBytes([{ bytes: { a: 1, b: 2 } }, { bytes: { a: 3 } }])).toEqual({ a: 4, b: 2 });
  });
});
