import type { Config } from "../../config/schema.ts";
import type { Decision } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";

/**
 * `--sleep-idle-seconds N` from `llama.idle_sleep_s`: llama-server unloads the model after N idle
 * seconds and reloads it on the next request by itself (test/fixtures/llama-server/transcripts/85,
 * 86). 0 leaves the flag out: llama-server's own default (-1) never sleeps.
 */
export function idleSleepDecision(llama: Pick<Config["llama"], "idle_sleep_s">): Decision {
  const seconds = llama.idle_sleep_s;
  return {
    name: "idle_sleep",
    value: seconds,
    source: "config",
    flags: flags.idleSleep(seconds),
    reason:
      seconds > 0
        ? `the model is unloaded after ${seconds} s without requests (llama.idle_sleep_s) and reloaded by the next one`
        : "llama.idle_sleep_s is 0: the model stays loaded while the core runs",
  };
}
