import type { Hit } from "../../store/bm25.ts";
import type { MemoryIndex } from "../../store/memory-index.ts";
import { logger } from "../../util/logger.ts";
import type { TurnContext } from "./context.ts";

/** The passages of the user's memory that match the turn's input (none when memory is off or fails). */
export function recall(ctx: TurnContext): Hit[] {
  const mem = ctx.deps.config.memory;
  const input = ctx.session.state.user_input;
  if (!mem.enabled || mem.top_k === 0 || input.trim() === "") return [];
  try {
    return memoryOf(ctx).search(input, mem.top_k, ctx.sessionId);
  } catch (err) {
    logger.warn(`trace=${ctx.traceId} memory search failed: ${(err as Error).message}`);
    return [];
  }
}

/** Adds the finished turn (input and answer) to the user's memory; a failure costs only that. */
export function remember(ctx: TurnContext, response: string): void {
  const input = ctx.session.state.user_input;
  if (!ctx.deps.config.memory.enabled || input.trim() === "") return;
  try {
    memoryOf(ctx).addTurn({
      id: ctx.traceId,
      session_id: ctx.sessionId,
      text: `${input}\n${response}`,
      at: ctx.deps.now().toISOString(),
    });
  } catch (err) {
    logger.warn(`trace=${ctx.traceId} memory update failed: ${(err as Error).message}`);
  }
}

/** The user's memory; what it found wrong with its file (once per process) goes in the result. */
function memoryOf(ctx: TurnContext): MemoryIndex {
  const index = ctx.deps.memory(ctx.params.user_id);
  ctx.warnings.push(...index.takeWarnings());
  return index;
}
