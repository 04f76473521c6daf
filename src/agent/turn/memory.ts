import { withoutQuotes } from "../../runtime/log-redact.ts";
import type { MemoryHit } from "../../store/memory-store.ts";
import type { QueryVector } from "../../store/memory-vectors.ts";
import { logger } from "../../util/logger.ts";
import { within } from "../../util/within.ts";
import { noteSources, quotedPassages } from "../kv/prompt-record.ts";
import type { TurnContext } from "./context.ts";
import type { PromptLayout } from "./prompt-layout.ts";

/**
 * How long a turn waits for the `memory.folders` index still being built before it recalls
 * from what is indexed so far (docs/agent.md, "Memory"); the index goes on in the background.
 */
export const RECALL_WAIT_MS = 250;

/**
 * How long recall waits for the query's vector: a loaded embedding model answers a short input
 * in milliseconds; one still loading (the first turn after a start) is not waited for, and that
 * turn recalls by words alone while the load goes on.
 */
export const QUERY_VECTOR_WAIT_MS = 1500;

/** The passages of the user's memory that match the turn's input (none when memory is off or fails). */
export async function recall(ctx: TurnContext): Promise<MemoryHit[]> {
  const mem = ctx.deps.config.memory;
  const input = ctx.session.state.user_input;
  if (!mem.enabled || mem.top_k === 0 || input.trim() === "") return [];
  try {
    const store = ctx.deps.store();
    const [vector] = await Promise.all([
      queryVector(ctx, input),
      store.folderIndex.whenIndexed(RECALL_WAIT_MS),
    ]);
    const hits = store.memory.search(ctx.params.user_id, input, mem.top_k, ctx.sessionId, vector);
    // A folder's file removed or edited since it was indexed is not quoted as it was.
    return await store.folderIndex.current(hits);
  } catch (err) {
    logger.warn(`trace=${ctx.traceId} memory search failed: ${(err as Error).message}`);
    return [];
  }
}

/**
 * The recalled passages still stored as the prompt is built: a turn may wait minutes after its
 * recall (another chat's slot, a model's start), and a delete answered meanwhile must not have
 * its text sent after it. None when the store cannot say.
 */
export function stillStored(ctx: TurnContext, hits: MemoryHit[]): MemoryHit[] {
  if (hits.length === 0) return hits;
  try {
    return ctx.deps.store().memory.stillStored(hits);
  } catch (err) {
    logger.warn(
      `trace=${ctx.traceId} memory: recalled passages could not be checked: ${(err as Error).message}`,
    );
    return [];
  }
}

/**
 * Before each later step of a turn, and a resume's first when its pending calls ran: passages
 * erased since the last request or the setup (a `documents.delete` answered while a tool ran) are not sent again, neither the turn's own notes nor an earlier
 * message's (the prompt record's). The notes are laid out anew without them. They stay among the
 * sources (an earlier step read them), named as the result is sent: an erased one without its
 * name. True when some went: the slot that holds them is then emptied (kv/slot-clear.ts
 * `emptyTurnSlot`).
 */
export function dropErased(ctx: TurnContext, layout: PromptLayout): boolean {
  const hits = layout.recalled;
  const kept = stillStored(ctx, [...hits]);
  const gone = notedGone(ctx, layout);
  if (kept.length === hits.length && gone.length === 0) return false;
  layout.recall(kept);
  layout.dropNotes(new Set(gone));
  return true;
}

/** The sources earlier messages' notes quote that are erased; all of them when the store cannot say. */
function notedGone(ctx: TurnContext, layout: PromptLayout): string[] {
  const record = { cut: 0, notes: layout.historyNotes };
  if (record.notes.length === 0) return [];
  try {
    return ctx.deps.store().sourcesGone(ctx.params.user_id, quotedPassages(record));
  } catch (err) {
    logger.warn(`trace=${ctx.traceId} memory: notes could not be checked: ${(err as Error).message}`);
    return noteSources(record);
  }
}

/** The input's vector, when an embedding model answers in time; undefined otherwise (words alone). */
async function queryVector(ctx: TurnContext, input: string): Promise<QueryVector | undefined> {
  const embed = ctx.deps.embedQuery;
  if (!embed) return undefined;
  const abort = new AbortController();
  const signal = AbortSignal.any([ctx.deps.signal, abort.signal]);
  const asked = embed(input, signal).catch((err: Error) => {
    // Its 500 can quote the request, the user's input (docs/protocol.md: logs never do).
    if (!signal.aborted)
      logger.warn(`trace=${ctx.traceId} memory: the query's embedding failed: ${withoutQuotes(err.message)}`);
    return undefined;
  });
  const vector = await within(asked, QUERY_VECTOR_WAIT_MS, undefined);
  // Given up on: the request is aborted too, so it never competes with the turn's own.
  if (vector === undefined) abort.abort();
  return vector;
}

/** The finished turn as memory keeps it (input and answer), committed with the turn; none when memory is off. */
export function memoryText(ctx: TurnContext, response: string): string | undefined {
  const input = ctx.session.state.user_input;
  if (!ctx.deps.config.memory.enabled || input.trim() === "") return undefined;
  return `${input}\n${response}`;
}
