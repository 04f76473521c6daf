import type { MemoryHit } from "../../store/memory-store.ts";
import { logger } from "../../util/logger.ts";
import type { TurnContext } from "./context.ts";

/**
 * How long a turn waits for the `memory.folders` index still being built before it recalls
 * from what is indexed so far (docs/agent.md, "Memory"); the index goes on in the background.
 */
export const RECALL_WAIT_MS = 250;

/** The passages of the user's memory that match the turn's input (none when memory is off or fails). */
export async function recall(ctx: TurnContext): Promise<MemoryHit[]> {
  const mem = ctx.deps.config.memory;
  const input = ctx.session.state.user_input;
  if (!mem.enabled || mem.top_k === 0 || input.trim() === "") return [];
  try {
    const store = ctx.deps.store();
    await store.folderIndex.whenIndexed(RECALL_WAIT_MS);
    return store.memory.search(ctx.params.user_id, input, mem.top_k, ctx.sessionId);
  } catch (err) {
    logger.warn(`trace=${ctx.traceId} memory search failed: ${(err as Error).message}`);
    return [];
  }
}

/** The finished turn as memory keeps it (input and answer), committed with the turn; none when memory is off. */
export function memoryText(ctx: TurnContext, response: string): string | undefined {
  const input = ctx.session.state.user_input;
  if (!ctx.deps.config.memory.enabled || input.trim() === "") return undefined;
  return `${input}\n${response}`;
}
