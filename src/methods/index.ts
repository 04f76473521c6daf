import type { MethodDef } from "./types.ts";

/**
 * Every method the core serves, by name, loaded on first use: a ping never pays for the
 * planner, the agent or the MCP SDK.
 */
export interface MethodEntry {
  name: string;
  /** Long-running work that `cancel` may target (chat, warm-up); known before the module loads. */
  cancellable: boolean;
  load: () => Promise<MethodDef>;
}

const entry = (name: string, load: () => Promise<MethodDef>, cancellable = false): MethodEntry => ({
  name,
  cancellable,
  load,
});

export const METHODS: MethodEntry[] = [
  entry("initialize", () => import("./initialize.ts").then((m) => m.initialize as MethodDef)),
  entry("ping", () => import("./ping.ts").then((m) => m.ping as MethodDef)),
  entry("doctor", () => import("./doctor.ts").then((m) => m.doctor as MethodDef)),
  entry("plan", () => import("./plan.ts").then((m) => m.plan as MethodDef)),
  entry("chat", () => import("./chat.ts").then((m) => m.chat as MethodDef), true),
  entry("cancel", () => import("./cancel.ts").then((m) => m.cancel as MethodDef)),
  entry("shutdown", () => import("./shutdown.ts").then((m) => m.shutdown as MethodDef)),
  entry("warmup", () => import("./warmup.ts").then((m) => m.warmup as MethodDef), true),
];

export const TEST_METHOD_NAMES = ["test.sleep", "test.flood", "test.fail"] as const;

export function buildRegistry(options: { testMethods: boolean }): Map<string, MethodEntry> {
  const list = [...METHODS];
  if (options.testMethods) {
    for (const name of TEST_METHOD_NAMES) {
      list.push(
        entry(
          name,
          () => import("./test-methods.ts").then((m) => m.TEST_METHODS.find((t) => t.name === name)!),
          name === "test.sleep",
        ),
      );
    }
  }
  return new Map(list.map((m) => [m.name, m]));
}
