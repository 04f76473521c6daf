import { describe, expect, test } from "bun:test";
import { devicePlans } from "../../../src/plan/decide/devices.ts";
import { GIB, usage } from "./fake-fit.ts";

describe("devicePlans", () => {
  test("one row per device; a unified GPU's use comes out of RAM too", () => {
    const rows = devicePlans(
      {
        ram: { total: 16 * GIB, available: 12 * GIB, margin: GIB, budget: 11 * GIB },
        gpus: [
          { i: 1, total: 8 * GIB, available: 8 * GIB, margin: 0, budget: 8 * GIB, unified: true, name: "M" },
        ],
      },
      { cpu: usage(2 * GIB), gpus: [usage(3 * GIB)], kv_cells_per_slot: 256, total: 5 * GIB },
      null,
    );
    expect(rows.map((r) => [r.id, r.kind, r.name])).toEqual([
      ["cpu", "cpu", "CPU"],
      ["gpu1", "gpu", "M"],
    ]);
    expect(rows[0]!.free_after_bytes).toBe(6 * GIB);
    expect(rows[1]).toMatchObject({ unified: true, budget_bytes: 8 * GIB, free_after_bytes: 5 * GIB });
    expect(rows[0]).toMatchObject({ total_bytes: 16 * GIB, available_bytes: 12 * GIB, margin_bytes: GIB });
  });
});
