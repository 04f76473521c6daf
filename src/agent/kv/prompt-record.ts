import { z } from "zod";

/**
 * What a session's prompt is beyond its history (docs/agent.md#prompt-reuse), kept so that every
 * turn sends the prefix the last one left in the slot: where the history starts (the cut, moved
 * only when it overflows), and the memory notes each user message was sent with. A note stays with
 * its message for as long as that message is sent, so the tokens after it are the same next turn;
 * dropping it would change the prompt there and make llama-server process the rest again. Kept in
 * memory and beside the session's saved KV state (kv-disk.ts), removed with both.
 */

export const NoteRecordSchema = z.object({
  /** The user message (its seq in the session) the notes were sent with. */
  seq: z.number().int().nonnegative(),
  /** As the model saw it, before the message's own text. */
  text: z.string(),
  /** The passages' ids, so a later turn does not send one again while it is still in the prompt. */
  ids: z.array(z.string()),
  /** Where they came from (`session:<id>`, `file:<path>`, `document:<id>`): erasing one takes them along. */
  sources: z.array(z.string()),
});
export type NoteRecord = z.infer<typeof NoteRecordSchema>;

export const PromptRecordSchema = z.object({
  /** The seq of the first history message sent. */
  cut: z.number().int().nonnegative(),
  notes: z.array(NoteRecordSchema),
  /**
   * The seq from which the history's images are sent (docs/protocol.md#images); those before it
   * go as the text `[image]`. Moved like the cut, only when they no longer fit; absent: 0.
   */
  image_cut: z.number().int().nonnegative().optional(),
  /**
   * The seq from which the history's tool results are sent whole; those before it go as a short
   * note that one was left out. Moved like the image cut, after the images, before the cut.
   */
  result_cut: z.number().int().nonnegative().optional(),
  /**
   * Notes the slot's tokens hold that no message is sent with: those of a turn not committed (a
   * cancel, a failure) after a request carried them. Never laid out again; kept only so that an
   * erase of what they quote finds the slot and its saved state. Gone once a request replaces them.
   */
  held: z.array(NoteRecordSchema.pick({ ids: true, sources: true })).optional(),
});
export type PromptRecord = z.infer<typeof PromptRecordSchema>;

export function emptyRecord(): PromptRecord {
  return { cut: 0, notes: [] };
}

/** The notes whose passages the slot holds: those the record sends, and those it holds only (`held`). */
export function quotingNotes(record: PromptRecord): Pick<NoteRecord, "ids" | "sources">[] {
  return record.held?.length ? [...record.notes, ...record.held] : record.notes;
}

/** The sources of the notes a record sends or holds: what the KV state saved with it holds. */
export function noteSources(record: PromptRecord): string[] {
  return [...new Set(quotingNotes(record).flatMap((n) => n.sources))];
}

/**
 * The sources a record's notes quote, each with the memory rows (`memory.id`) of its passages
 * (a note's ids are `<source>#<row>`, agent/turn/prompt.ts): what is asked of the database to
 * know that none was erased since (store/quoted-sources.ts).
 */
export function quotedPassages(record: PromptRecord): Map<string, number[]> {
  const quoted = new Map<string, number[]>();
  for (const note of quotingNotes(record)) {
    for (const source of note.sources) if (!quoted.has(source)) quoted.set(source, []);
    for (const id of note.ids) {
      const at = id.lastIndexOf("#");
      const row = Number(id.slice(at + 1));
      if (at > 0 && Number.isSafeInteger(row)) quoted.get(id.slice(0, at))?.push(row);
    }
  }
  return quoted;
}

/**
 * `source` erased: the records under `prefix` (a user's) that send a note of it send it no more
 * (their later turns' prompts differ from there on, which is the point). Their keys: the slots
 * holding their tokens, which hold the passage, are never saved again.
 */
export function dropSource(records: Map<string, PromptRecord>, prefix: string, source: string): Set<string> {
  const holding = new Set<string>();
  for (const [k, r] of records) {
    const quotes = (n: Pick<NoteRecord, "sources">) => n.sources.includes(source);
    if (!k.startsWith(prefix) || !quotingNotes(r).some(quotes)) continue;
    holding.add(k);
    const held = r.held?.filter((n) => !quotes(n));
    records.set(k, { ...r, notes: r.notes.filter((n) => !quotes(n)), ...(held ? { held } : {}) });
  }
  return holding;
}
