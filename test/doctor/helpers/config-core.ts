import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DoctorDeps, runDoctor } from "../../../src/doctor/doctor.ts";
import { defaultPlanDeps } from "../../../src/models/local-plan-deps.ts";
import { CoreServices } from "../../../src/server/services.ts";
import { cpuOnlyMachine } from "../../fixtures/hardware.ts";

/** doctor's edges on a CPU-only machine with a llama-server that answers its version. */
export const doctorDeps: DoctorDeps = {
  ...defaultPlanDeps,
  probe: async () => cpuOnlyMachine(),
  run: async () => ({ kind: "exit", code: 0, stdout: "", stderr: "version: 1 (b1)" }),
};

/** A core over `dir/config.yaml` (`yaml` after the llama section), with a stub llama-server beside it. */
export function coreWithConfig(dir: string, yaml: string): CoreServices {
  const bin = join(dir, "llama-server");
  writeFileSync(bin, "#!/bin/sh\n");
  chmodSync(bin, 0o755);
  writeFileSync(join(dir, "config.yaml"), `llama:\n  binary: ./llama-server\n${yaml}`);
  return new CoreServices({ configPath: "config.yaml", cwd: dir });
}

type Report = Awaited<ReturnType<typeof runDoctor>>;
export const checkById = (r: Report, id: string) => r.checks.find((c) => c.id === id);
