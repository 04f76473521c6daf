import { cancel } from "./cancel.ts";
import { chat } from "./chat.ts";
import { doctor } from "./doctor.ts";
import { initialize } from "./initialize.ts";
import { ping } from "./ping.ts";
import { plan } from "./plan.ts";
import { shutdown } from "./shutdown.ts";
import { TEST_METHODS } from "./test-methods.ts";
import type { MethodDef } from "./types.ts";

/** Every method the core serves, by name. Test-only methods join when asked for. */
export function buildRegistry(options: { testMethods: boolean }): Map<string, MethodDef> {
  const list: MethodDef[] = [initialize, ping, doctor, plan, chat, cancel, shutdown] as MethodDef[];
  if (options.testMethods) list.push(...TEST_METHODS);
  return new Map(list.map((m) => [m.name, m]));
}
