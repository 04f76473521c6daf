import { join } from "node:path";
import type { Config } from "../../config/schema.ts";
import type { Decision } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";
import type { Decided } from "./decided.ts";

/** The folder under data_dir where conversations' KV state is saved (docs/agent.md#prompt-reuse). */
export const KV_DIR = "kv";

export function kvDirOf(dataDir: string): string {
  return join(dataDir, KV_DIR);
}

/**
 * `--slot-save-path`: where llama-server saves a slot's KV cache and restores it from
 * (test/fixtures/llama-server/transcripts/93), so a conversation is not processed again after a
 * restart or idle sleep. Given with `llama.kv_disk_bytes` 0 too, though the core then saves and
 * restores nothing: without it llama-server refuses every slot action (93e), the erase included,
 * and a deleted session's tokens would stay in its slot until the next session's turn moved them
 * into the RAM cache.
 */
export function decideSlotSave(
  llama: Pick<Config["llama"], "kv_disk_bytes">,
  dataDir: string,
): Decided<string | null> {
  const dir = kvDirOf(dataDir);
  const decision: Decision = {
    name: "slot_save",
    value: dir,
    source: "config",
    flags: flags.slotSavePath(dir),
    reason:
      llama.kv_disk_bytes === 0
        ? "llama.kv_disk_bytes is 0: no conversation's KV state is saved to disk; the folder is given so that a deleted session's slot can be emptied (llama-server takes no slot action without one)"
        : `a conversation's KV state is saved here when it would be lost (its slot taken, idle sleep, shutdown) and restored before its next turn, within llama.kv_disk_bytes (${llama.kv_disk_bytes} bytes)`,
  };
  return { value: dir, decision };
}
