import type { Decision } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";
import type { Decided } from "./decided.ts";

/**
 * `--cache-ram N` (MiB): llama-server keeps the prompts that left their slot in host RAM and brings
 * one back when its conversation returns (test/fixtures/llama-server/transcripts/94; 94b: 0
 * processes it again). Its own default, 8 GiB, is on top of the model and the KV cache and counted
 * by no plan, so the plan always sets it: enough for a few conversations per slot, from what the
 * RAM budget leaves once the launch is placed, never more than llama-server's default.
 */

const MIB = 1024 * 1024;
/** llama-server's default (common.h `cache_ram_mib`): more helps little, and is never planned. */
export const CACHE_RAM_DEFAULT_MIB = 8192;
/** Conversations' worth of KV cache the RAM cache holds beyond the slots themselves. */
const PROMPTS_KEPT = 4;
/** Share of the RAM the plan leaves free that the cache may take. */
const SHARE_OF_FREE = 0.5;

export interface CacheRamInput {
  /** The RAM budget left once the launch's own use (unified GPUs included) is taken. */
  ramLeftBytes: number;
  /** The launch's KV cache, all slots and devices together. */
  kvBytes: number;
}

export function decideCacheRam({ ramLeftBytes, kvBytes }: CacheRamInput): Decided<number> {
  const room = Math.max(0, Math.floor((ramLeftBytes * SHARE_OF_FREE) / MIB));
  const wanted = Math.max(1, Math.ceil((kvBytes * PROMPTS_KEPT) / MIB));
  const mib = Math.min(room, wanted, CACHE_RAM_DEFAULT_MIB);
  return { value: mib, decision: decision(mib, reason(mib, room, wanted)) };
}

function reason(mib: number, room: number, wanted: number): string {
  if (mib === 0)
    return "no RAM is left once the model and its KV cache are placed: the RAM prompt cache is off, so a conversation that lost its slot is processed again (or restored from disk)";
  const why =
    mib === wanted
      ? `${PROMPTS_KEPT} times the KV cache`
      : mib === room
        ? "half of the RAM the plan leaves free"
        : "llama-server's own default, the most it is given";
  return `prompts that left their slot are kept in RAM and brought back when their conversation returns: ${mib} MiB (${why}; counted in the plan's memory, never the unplanned ${CACHE_RAM_DEFAULT_MIB} MiB default)`;
}

function decision(mib: number, why: string): Decision {
  return { name: "cache_ram", value: mib, source: "auto", flags: flags.cacheRam(mib), reason: why };
}
