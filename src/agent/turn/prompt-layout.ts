import type { ChatMessage } from "../../protocol/chat-message.ts";
import type { MemoryHit } from "../../store/memory-store.ts";
import { estimateTokens, trimInSteps } from "../context-budget.ts";
import type { NoteRecord, PromptRecord } from "../kv/prompt-record.ts";
import { memoryNotes, withNotes } from "./prompt.ts";

/**
 * One turn's prompt laid out so its prefix is what the last turn left in the slot
 * (docs/agent.md#prompt-reuse): the system prompt, the history from the session's cut with the
 * notes each user message was sent with, then the turn's own messages, its user message carrying
 * this turn's new notes. The cut moves only when the history overflows, in a large step
 * (context-budget.ts).
 */
export class PromptLayout {
  private cutAt: number;
  /** Notes of earlier user messages, by seq. */
  private readonly notes: Map<number, NoteRecord>;
  /** This turn's notes, decided with its first request (later steps send the same). */
  private own: NoteRecord | undefined | null = null;
  /** History messages in the last request, and what they cost. */
  kept = 0;
  keptCost = 0;

  constructor(
    record: PromptRecord,
    private readonly hits: readonly MemoryHit[],
    /** The seq the turn's user message gets: the history's length. */
    private readonly userSeq: number,
  ) {
    this.cutAt = Math.min(record.cut, userSeq);
    // Notes of messages a rewrite replaced are gone with them.
    this.notes = new Map(record.notes.filter((n) => n.seq < userSeq).map((n) => [n.seq, n]));
  }

  get cut(): number {
    return this.cutAt;
  }

  /** The turn's own messages as sent. */
  turnMessages(turn: readonly ChatMessage[]): ChatMessage[] {
    if (this.own === null) {
      const sent = new Set([...this.notes.values()].filter((n) => n.seq >= this.cutAt).flatMap((n) => n.ids));
      this.own = memoryNotes(this.hits, this.userSeq, sent);
    }
    const [first, ...rest] = turn;
    return first ? [withNotes(first, this.own), ...rest] : [];
  }

  /** The history within `budget` tokens, as sent; the cut follows it. */
  history(history: readonly ChatMessage[], budget: number): ChatMessage[] {
    const sent = (i: number) => withNotes(history[i] as ChatMessage, this.notes.get(i));
    this.cutAt = trimInSteps(history, (i) => estimateTokens(sent(i)), this.cutAt, budget);
    const out = history.slice(this.cutAt).map((_, k) => sent(this.cutAt + k));
    this.kept = out.length;
    this.keptCost = out.reduce((n, m) => n + estimateTokens(m), 0);
    return out;
  }

  /**
   * The record the session keeps after this turn: the cut, the notes still sent, and this
   * turn's own when it was committed (its user message is then history).
   */
  record(committed: boolean): PromptRecord {
    const notes = [...this.notes.values()].filter((n) => n.seq >= this.cutAt);
    if (committed && this.own) notes.push(this.own);
    return { cut: this.cutAt, notes };
  }
}
