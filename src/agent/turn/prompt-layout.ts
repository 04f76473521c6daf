import { IMAGE_BODY_BYTES, imageBodyBytes } from "../../images/limits.ts";
import type { ChatMessage } from "../../protocol/chat-message.ts";
import type { MemoryHit } from "../../store/memory-store.ts";
import { estimateAll, estimateTokens, imagesFrom, trimInSteps } from "../context-budget.ts";
import type { NoteRecord, PromptRecord } from "../kv/prompt-record.ts";
import { withoutImages } from "./images.ts";
import { memoryNotes, withNotes } from "./prompt.ts";

/** What the layout asks of the turn's images: what a message's cost, and whether the model reads any. */
export interface ImageCosts {
  costOf(message: ChatMessage): number;
  /** False: every image of the history goes as `[image]` (a model without a projector). */
  vision: boolean;
  /** What a request's images may take of its body (IMAGE_BODY_BYTES; lowered by tests). */
  bodyBytes?: number;
}

/**
 * One turn's prompt laid out so its prefix is what the last turn left in the slot
 * (docs/agent.md#prompt-reuse): the system prompt, the history from the session's cut with the
 * notes each user message was sent with, then the turn's own messages, its user message carrying
 * this turn's new notes. The cut moves only when the history overflows, in a large step
 * (context-budget.ts); before it does, the history's images go (older ones as `[image]`,
 * docs/protocol.md#images), as sticky as the cut. They go too where they and the turn's own
 * would not fit the body llama-server reads (images/limits.ts): a conversation never grows a
 * request it refuses.
 */
export class PromptLayout {
  private cutAt: number;
  /** The first history message whose images are sent. */
  private imageCut: number;
  /** The first history message whose tool result is sent whole (withoutResult). */
  private resultCut: number;
  /** The turn's own messages before this one have their results left out (fitTurn). */
  private ownCut = 0;
  /** Notes of earlier user messages, by seq. */
  private readonly notes: Map<number, NoteRecord>;
  /** This turn's notes, decided with its first request (later steps send the same). */
  private own: NoteRecord | undefined | null = null;
  /** What the turn's own images take of the request's body (they are always sent). */
  private turnBytes = 0;
  /** History messages in the last request, and what they cost. */
  kept = 0;
  keptCost = 0;

  /** The record's image cut, kept as it was by a turn on a model that reads no images. */
  private readonly recordImageCut: number | undefined;
  /** The notes the slot holds and no message is sent with (PromptRecord `held`), as the record had them. */
  private readonly held: NonNullable<PromptRecord["held"]>;
  /** The record's notes, as the slot holds them until llama-server reads this turn's request. */
  private readonly before: readonly NoteRecord[];
  /** The sources erased meanwhile (`dropNotes`): their slot was emptied, nothing of them is held. */
  private readonly erased = new Set<string>();

  constructor(
    record: PromptRecord,
    private hits: readonly MemoryHit[],
    /** The seq the turn's user message gets: the history's length. */
    private readonly userSeq: number,
    private readonly images: ImageCosts = { costOf: () => 0, vision: true },
  ) {
    this.cutAt = Math.min(record.cut, userSeq);
    this.recordImageCut = record.image_cut;
    this.held = record.held ?? [];
    this.before = record.notes;
    this.imageCut = images.vision ? Math.min(record.image_cut ?? 0, userSeq) : userSeq;
    this.resultCut = Math.min(record.result_cut ?? 0, userSeq);
    // Notes of messages a rewrite replaced are gone with them.
    this.notes = new Map(record.notes.filter((n) => n.seq < userSeq).map((n) => [n.seq, n]));
  }

  get cut(): number {
    return this.cutAt;
  }

  /** The passages recalled for this turn's own notes. */
  get recalled(): readonly MemoryHit[] {
    return this.hits;
  }

  /** The turn's own notes laid out again from `kept` alone (the others erased since they were sent). */
  recall(kept: readonly MemoryHit[]): void {
    this.hits = kept;
    this.own = null;
  }

  /** The notes earlier user messages are sent with. */
  get historyNotes(): NoteRecord[] {
    return [...this.notes.values()];
  }

  /** Earlier messages' notes quoting `gone` (erased since they were sent) are sent no more. */
  dropNotes(gone: ReadonlySet<string>): void {
    for (const s of gone) this.erased.add(s);
    for (const [seq, note] of this.notes) if (note.sources.some((s) => gone.has(s))) this.notes.delete(seq);
    this.own = null;
  }

  /** The turn's own messages as sent. */
  turnMessages(turn: readonly ChatMessage[]): ChatMessage[] {
    if (this.own === null) {
      const sent = new Set([...this.notes.values()].filter((n) => n.seq >= this.cutAt).flatMap((n) => n.ids));
      this.own = memoryNotes(this.hits, this.userSeq, sent);
    }
    this.turnBytes = bodyBytesOf(turn);
    const [first, ...rest] = turn;
    return first ? [withNotes(first, this.own), ...rest] : [];
  }

  /**
   * The turn's own messages (turnMessages') within `room` tokens: once they do not fit, their
   * oldest tool results that the model has answered since go as notes (withoutResult), as the
   * history's do, and the thinking of its answered steps with them, until they fit. The last
   * step's results and thinking, which the model has not yet acted on, are always sent. As sticky as the history's cut: a result left out stays out for the turn. No
   * `room`: every answered result goes (llama-server refused what the estimate let through).
   */
  fitTurn(turn: readonly ChatMessage[], room = Number.NEGATIVE_INFINITY): ChatMessage[] {
    const answered = turn.findLastIndex((m) => m.role === "assistant");
    const out = turn.map((m, i) => (i < this.ownCut ? withoutResult(m) : m));
    let cost = estimateAll(out);
    for (let i = this.ownCut; i < answered && cost > room; i++) {
      const whole = out[i] as ChatMessage;
      out[i] = withoutResult(whole);
      cost += estimateTokens(out[i]) - estimateTokens(whole);
      this.ownCut = i + 1;
    }
    return out;
  }

  /**
   * The room fitTurn gets with the history in it: where leaving out the turn's answered results
   * lets the history be sent without a whole turn going (its images and results left out), they
   * go first, since the history's cut never comes back; else `room`, the history going anyway.
   */
  turnRoom(history: readonly ChatMessage[], turn: readonly ChatMessage[], room: number): number {
    let bare = 0;
    // Stopped once over: a long session's first turn (cut at 0) costed every message, 100k of them.
    for (let i = this.cutAt; i < history.length && bare <= room; i++) bare += this.noted(history, i);
    if (bare > room) return room;
    const answered = turn.findLastIndex((m) => m.role === "assistant");
    const least = estimateAll(turn.map((m, i) => (i < answered ? withoutResult(m) : m)));
    return least + bare <= room ? room - bare : room;
  }

  /** A history message's tokens with its images and tool result left out, its notes kept. */
  private noted(history: readonly ChatMessage[], i: number): number {
    const m = history[i] as ChatMessage;
    if (m.role === "tool") return estimateTokens(withoutResult(m));
    return estimateTokens(withNotes(withoutImages(m), this.notes.get(i)));
  }

  /** What the turn's own messages' images cost (they are always sent). */
  turnImageCost(turn: readonly ChatMessage[]): number {
    return turn.reduce((n, m) => n + this.images.costOf(m), 0);
  }

  /** The history within `budget` tokens, as sent; the cut and the images' cut follow it. */
  history(history: readonly ChatMessage[], budget: number): ChatMessage[] {
    const at = (i: number) => history[i] as ChatMessage;
    // Each costed once: the passes below ask each message's again (a JSON of it each time), and
    // a long session's first turn with no record (cut at 0) held the loop ~280 ms at 100k messages.
    const text = once(history.length, (i) =>
      estimateTokens(withNotes(withoutImages(at(i)), this.notes.get(i))),
    );
    const image = (i: number) => this.images.costOf(at(i));
    this.imageCut = imagesFrom(history, text, image, this.cutAt, Math.max(this.imageCut, 0), budget);
    this.imageCut = bodyCut(
      history,
      this.imageCut,
      this.cutAt,
      (this.images.bodyBytes ?? IMAGE_BODY_BYTES) - this.turnBytes,
    );
    // Then the tool results (imagesFrom's steps, their costs in place of the images'), before any
    // whole turn: a turn that read a large one went with its answer, and the cut never comes back.
    const noted = once(history.length, (i) =>
      at(i).role === "tool" ? estimateTokens(withoutResult(at(i))) : text(i),
    );
    const withImage = (i: number) => noted(i) + (i >= this.imageCut ? image(i) : 0);
    const result = (i: number) => text(i) - noted(i);
    const results = imagesFrom(history, withImage, result, this.cutAt, this.resultCut, budget);
    // Every result left out and still over budget: whole turns go all the same, and those kept
    // keep their results (the last turn's, which fitted, was a note from then on: the cut sticks).
    // Summed only while within the budget: a long session's first turn costed all 100k messages.
    let bare = 0;
    for (let i = this.cutAt; i < history.length && bare <= budget; i++) bare += withImage(i);
    if (results < history.length || bare <= budget) this.resultCut = results;
    const cost = (i: number) => withImage(i) + (i >= this.resultCut ? result(i) : 0);
    this.cutAt = trimInSteps(history, cost, this.cutAt, budget);
    const sent = (i: number) => {
      const m = i >= this.resultCut ? at(i) : withoutResult(at(i));
      return withNotes(i >= this.imageCut ? m : withoutImages(m), this.notes.get(i));
    };
    const out = history.slice(this.cutAt).map((_, k) => sent(this.cutAt + k));
    this.kept = out.length;
    this.keptCost = out.reduce((n, _, k) => n + cost(this.cutAt + k), 0);
    return out;
  }

  /**
   * The record the session keeps after this turn: the cut, the notes still sent, and this
   * turn's own when it was committed (its user message is then history). Not committed, a turn
   * whose request was `sent` with its own notes left them in the slot all the same: they are
   * `held`, so an erase of what they quote still finds the slot and its saved state. Only a
   * request llama-server `read` (a reply came) surely replaced what the slot held before; one
   * refused or failed first may have left it, so it stays held.
   */
  record(committed: boolean, sent = true, read = sent): PromptRecord {
    const notes = [...this.notes.values()].filter((n) => n.seq >= this.cutAt);
    if (committed && this.own) notes.push(this.own);
    const imageCut = this.images.vision ? this.imageCut : this.recordImageCut;
    return {
      cut: this.cutAt,
      notes,
      ...(imageCut ? { image_cut: imageCut } : {}),
      ...(this.resultCut ? { result_cut: this.resultCut } : {}),
      ...this.heldAfter(committed, sent, read, notes),
    };
  }

  /** A refused turn leaves `record` as it was (turn.ts), but what its requests put in the slot is held. */
  unchanged(record: PromptRecord, sent: boolean, read: boolean): PromptRecord {
    const { held: _, ...rest } = record;
    return { ...rest, ...this.heldAfter(false, sent, read, record.notes) };
  }

  /**
   * The notes the slot holds after this turn that `notes` does not send. Unread, the slot is as
   * before: the old record's held notes, and those of messages the turn's cut or edit left out.
   */
  private heldAfter(
    committed: boolean,
    sent: boolean,
    read: boolean,
    notes: readonly NoteRecord[] = [],
  ): Pick<PromptRecord, "held"> {
    const held: NonNullable<PromptRecord["held"]> = [];
    const hold = (n: Pick<NoteRecord, "ids" | "sources">) => {
      const same = (h: typeof n) => h.ids.join() === n.ids.join() && h.sources.join() === n.sources.join();
      if (n.sources.length && !n.sources.some((s) => this.erased.has(s)) && !held.some(same))
        held.push({ ids: n.ids, sources: n.sources });
    };
    if (!read) for (const n of [...this.held, ...this.before.filter((b) => !notes.includes(b))]) hold(n);
    if (!committed && sent && this.own) hold(this.own);
    return held.length ? { held } : {};
  }
}

/** `cost` of message i, asked once for each i below `length` (a cost is never negative). */
function once(length: number, cost: (i: number) => number): (i: number) => number {
  const known = new Float64Array(length).fill(-1);
  return (i) => {
    const had = known[i] ?? -1;
    if (had >= 0) return had;
    const c = cost(i);
    known[i] = c;
    return c;
  };
}

/**
 * A message as sent once its step no longer fits: a tool result as a note of what was left out;
 * an assistant message without the thinking the model has since acted on (left out, never null:
 * llama-server refuses a null with a 500, 91g). Only the turn's own carry thinking.
 */
function withoutResult(message: ChatMessage): ChatMessage {
  if (message.role === "assistant" && message.reasoning_content !== undefined) {
    const { reasoning_content: _, ...rest } = message;
    return rest;
  }
  if (message.role !== "tool" || message.content.length <= RESULT_NOTE_CHARS) return message;
  const content = `[tool result left out to fit the context: ${message.content.length} characters]`;
  return { ...message, content };
}

/** A tool result this short is sent whole all the same: its note would be as long. */
const RESULT_NOTE_CHARS = 80;

/** What a list of messages' images take of a request's body. */
function bodyBytesOf(messages: readonly ChatMessage[]): number {
  let n = 0;
  for (const m of messages)
    if (m.role === "user") for (const r of m.attachments ?? []) n += imageBodyBytes(r);
  return n;
}

/**
 * The first message from `imageCut` on whose images, with all the later ones', fit `room` bytes.
 * Only those sent count, from the cut `from` on: walked from `imageCut`, a long session whose
 * images never had to go (its image cut still 0) walked its whole history each step.
 */
function bodyCut(history: readonly ChatMessage[], imageCut: number, from: number, room: number): number {
  let used = 0;
  for (let i = history.length - 1; i >= Math.max(imageCut, from); i--) {
    used += bodyBytesOf([history[i] as ChatMessage]);
    if (used > room) return i + 1;
  }
  return imageCut;
}
