import { describe, expect, test } from "bun:test";
import { decideOffloadDevices } from "../../../src/plan/decide/offload-devices.ts";
import { testGpu } from "../../fixtures/hardware.ts";

// `--device` (docs/plan.md "Which GPUs"): only where llama-server lists a device the plan leaves out.

const vouched = { ...testGpu(0), device: "Vulkan1" };

describe("decideOffloadDevices", () => {
  test("a listed device left out: the planned GPUs by their listed names, with the reason", () => {
    const d = decideOffloadDevices({ gpus: [vouched], devices_left_out: ["Vulkan0"] }, 33, 0);
    expect(d.value).toEqual(["Vulkan1"]);
    expect(d.decision).toMatchObject({ name: "devices", flags: ["--device", "Vulkan1"] });
    expect(d.decision?.reason).toContain("Vulkan0");
  });

  test("llama-server's own choice stands: nothing left out, no layers on a GPU, RPC workers, a GPU without a listed name", () => {
    expect(decideOffloadDevices({ gpus: [vouched] }, 33, 0)).toEqual({ value: null });
    expect(decideOffloadDevices({ gpus: [vouched], devices_left_out: ["Vulkan0"] }, 0, 0).value).toBeNull();
    expect(decideOffloadDevices({ gpus: [vouched], devices_left_out: ["Vulkan0"] }, 33, 1).value).toBeNull();
    const unnamed = { ...testGpu(0) };
    delete (unnamed as { device?: string }).device;
    expect(decideOffloadDevices({ gpus: [unnamed], devices_left_out: ["Vulkan0"] }, 33, 0).value).toBeNull();
  });
});
