import type { Config } from "../../config/schema.ts";
import { flags } from "../argv.ts";
import type { Decided } from "./decided.ts";

export type SlotsConfig = {
  llama: Pick<Config["llama"], "parallel">;
  app: Pick<Config["app"], "max_parallel_chats">;
};

/**
 * Parallel slots (`-np`): `llama.parallel`, else one per chat `app.max_parallel_chats` lets run,
 * else 1. Always explicit, so llama-server does not split one context into its default 4.
 */
export function decideSlots(config: SlotsConfig): Decided<number> {
  const { parallel } = config.llama;
  if (typeof parallel === "number") {
    return slots(parallel, `llama.parallel: ${parallel} chats at once, each with its own context`);
  }
  const chats = config.app.max_parallel_chats;
  if (typeof chats === "number") {
    return slots(chats, "app.max_parallel_chats: one slot per chat that may run at once");
  }
  return {
    value: 1,
    decision: {
      name: "slots",
      value: 1,
      source: "auto",
      flags: flags.slots(1),
      reason:
        "one chat at a time gets the whole context (llama-server's default of 4 would split it); set llama.parallel for more",
    },
  };
}

function slots(n: number, reason: string): Decided<number> {
  return {
    value: n,
    decision: { name: "slots", value: n, source: "config", flags: flags.slots(n), reason },
  };
}
