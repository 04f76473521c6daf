import type { PreparedImage } from "../../images/prepare.ts";
import type { Warning } from "../../protocol/chat.ts";
import type { AttachmentRef, ChatMessage } from "../../protocol/chat-message.ts";
import { CoreError } from "../../protocol/errors.ts";
import { type Checkpoint, checkpointBody, INPUT_APART_CHARS } from "../../store/checkpoint.ts";
import type { CheckpointWrite } from "../../store/checkpoint-rows.ts";
import { indexesLong, type TurnMessage } from "../../store/conversations.ts";
import type { Store } from "../../store/store.ts";
import type { TurnMark } from "../../store/turn-mark.ts";
import { logger } from "../../util/logger.ts";
import { cutText } from "../../util/text-cut.ts";
import type { SessionKey } from "../kv/session-key.ts";
import { refsOf, TurnImages } from "./images.ts";
import { readCheckpoint } from "./read-checkpoint.ts";

/**
 * A failed rewrite of dropped images' pages (a full disk, a locked database) stays owed, their
 * bytes in the database's log until the next erase or start: logged, so an operator can tell
 * (the store's error names no message's words).
 */
function stillOwed(what: string, err: unknown): void {
  logger.warn(
    `${what} were dropped, but the rewrite of their pages failed and stays owed: ${(err as Error).message}`,
  );
}

/** The turn so far, as its checkpoint keeps it. */
export type TurnState = Omit<Checkpoint, "version" | "updated_at">;

/**
 * The session as one turn sees it: the history before the turn, the turn so far (the state
 * its checkpoint keeps, which the turn changes in place), and the writes that keep both in
 * the database. A checkpoint is a row written in its own transaction: once written it survives
 * the process's death, so nothing waits for a later "commit" of it.
 */
export class TurnSession {
  /** The turn's long input is in `checkpoint_inputs`, as a save of this state wrote it: later saves keep it. */
  private inputSaved = false;
  /** The session's row is made with the first image part, or the long input's first checkpoint, off the loop (`stageIn`). */
  private rowOwed = false;
  /**
   * The turn sets aside an interrupted one (not resumed) that staged images, or one whose
   * checkpoint was unreadable (`checkpoint_reset`): they go at the first write (its KV state: `set_aside`).
   */
  private settleSetAside = false;
  /** A write for its new images ran (their session's row, a part, their erase): a failure puts back. */
  private staged = false;

  private constructor(
    private readonly store: Store,
    private readonly key: SessionKey,
    readonly history: readonly ChatMessage[],
    readonly state: TurnState,
    /** The checkpoint as this turn found it, put back if the turn is refused. */
    private readonly prior: Checkpoint | undefined,
    private readonly now: () => Date,
    /**
     * The erase mark when the turn began and its lease's holder: no write of it lands once its
     * session is erased, or taken over by another core (store/session-lease.ts `TurnMark`).
     */
    private readonly mark: TurnMark,
    /** The chat's new images, staged before the turn's first checkpoint (`firstWrite`; none for a resumed turn). */
    private readonly newImages: readonly PreparedImage[],
    /** The turn's images: their bytes, their costs (docs/protocol.md#images). */
    readonly images: TurnImages,
  ) {}

  /**
   * Loads the history and any checkpoint (one it cannot use is dropped, with a warning), picks
   * the state to run and writes the turn's first checkpoint, before run_start: a database that
   * refuses it fails the chat first. Run inside the session lease's transaction (run-turn.ts), so
   * the lease, the reading and the checkpoint are one write on the turn's way to its request
   * (docs/performance.md, "The session in one write"); nothing can change the session between
   * the reading and the checkpoint, so no write here looks for an erase.
   */
  static begin(
    store: Store,
    key: SessionKey,
    start: TurnStart,
    warnings: Warning[],
    now: () => Date,
  ): TurnSession {
    const mark = { since: store.guard(() => store.conversations.erasureMark()), owner: store.leases.owner };
    const read = store.guard(() => readCheckpoint(store, key, warnings));
    const prior = read === "dropped" ? undefined : read;
    const state = initialState(prior, start, warnings);
    const resumed = start.resume && prior !== undefined;
    // Kept for a resume (checkpoint.ts). An unreadable one's turn, dropped, is set aside too.
    if ((prior !== undefined && !resumed) || read === "dropped") state.set_aside = true;
    let history = store.guard(() => store.conversations.history(key.userId, key.sessionId));
    // A message or a checkpoint is there only with its session's row (their foreign keys).
    const hasRow = prior !== undefined || history.length > 0;
    if (state.replace_from_seq !== undefined) history = history.slice(0, state.replace_from_seq);
    const images = new TurnImages(store, key.userId, { sessionId: key.sessionId, mark });
    const session = new TurnSession(
      store,
      key,
      history,
      state,
      prior,
      now,
      mark,
      resumed ? [] : (start.images ?? []),
      images,
    );
    session.settleSetAside =
      read === "dropped" || (prior !== undefined && !resumed && refsOf(stateOf(prior).turn).length > 0);
    session.stageIn(hasRow);
    return session;
  }

  private stageIn(hasRow: boolean): void {
    const { agent, user_input } = this.state;
    // The checkpoint waits for the new images (`firstWrite`): a death while they are staged
    // leaves the session as the turn found it, never a checkpoint that has lost its images. A
    // long input is written there too, on the store's thread (`write`), not in the lease's write
    // on the main loop (57–80 ms for 8 MiB, `ping` and `cancel` unanswered meanwhile). The
    // session's row is made in that write, or the first image part's: a cancel while it waits
    // (behind this core's erases) leaves nothing, so nothing is put back behind them either.
    if (this.newImages.length > 0 || user_input.length > INPUT_APART_CHARS) {
      this.rowOwed = !hasRow;
      return;
    }
    // Any a set-aside checkpoint had staged and this turn does not carry go.
    this.store.conversations.openTurn(
      this.key,
      agent,
      user_input,
      this.now(),
      this.carriedImages(),
      this.checkpointWrite(this.state),
      hasRow,
    );
    this.inputSaved = true;
  }

  /**
   * Where the lease's write did not write the turn's first checkpoint (`stageIn`): the chat's
   * new images kept, not yet tied to a message, a part a transaction with the loop given back
   * between (store/attachments.ts: in one write, 8 images of 20 MB held it 1.8 s), then the
   * first checkpoint, naming them all, in one write with the drop of what a set-aside checkpoint
   * had staged and this turn does not carry; before run_start. Under the session's lease,
   * checked in that write as every later one is; a new session's row is made in it (a long
   * input's) or in the first image part's. A failure erases what
   * was staged and puts the session back as the turn found it. The session, to go on with.
   */
  async firstWrite(signal?: AbortSignal): Promise<this> {
    // Unless written in the lease's write.
    if (!this.inputSaved) await this.writeFirst(signal);
    // The set-aside turn's photos go as a refused turn's (`putBack`): else the log and the freed
    // pages held their bytes until the next erase or start. A cancel ends its wait behind other
    // erases (before run_start); that or a failure leaves the rewrite owed.
    if (this.settleSetAside)
      await this.store.settleOwed(signal).catch((err) => {
        signal?.throwIfAborted();
        stillOwed("a set-aside turn's images", err);
      });
    return this;
  }

  private async writeFirst(signal?: AbortSignal): Promise<void> {
    try {
      if (this.newImages.length > 0) await this.stageImages(signal);
      await this.write(this.state, this.carriedImages(), signal);
      this.inputSaved = true;
    } catch (err) {
      // Cancelled while the write waited behind an erase: it never ran, and with no image staged (nor
      // a row made for them) nothing else was written: nothing to put back (its writes wait them out).
      if (!this.staged && err === signal?.reason) throw err;
      await this.putBack().catch(() => undefined);
      throw err;
    }
  }

  /** The chat's new images staged, tied to the turn's opening message. */
  private async stageImages(signal?: AbortSignal): Promise<void> {
    const { userId, sessionId } = this.key;
    const refs = await this.store.conversations.attachments.stage(
      userId,
      sessionId,
      this.newImages,
      this.now(),
      this.mark,
      (work, waitSignal) =>
        this.store.write(() => {
          this.staged = true; // a part, or the session's row for them: a failure puts back
          if (!this.rowOwed) return work();
          const done = this.store.conversations.attachments.inTransaction(() => this.openRow(work));
          this.rowOwed = false;
          return done;
        }, waitSignal),
      signal,
    );
    for (const [i, r] of refs.entries()) this.images.hold(r.id, (this.newImages[i] as PreparedImage).data);
    const opening = this.state.turn[0];
    if (opening?.role === "user") opening.attachments = [...(opening.attachments ?? []), ...refs];
  }

  /** A new session's row, then its images' first part, in one transaction: refused with it, never left. */
  private openRow<T>(work: () => T): T {
    const { agent, user_input } = this.state;
    const { userId, sessionId } = this.key;
    this.store.conversations.ensureSession(userId, sessionId, agent, user_input, this.now(), this.mark.since);
    return work();
  }

  /** The ids of the images this turn's messages carry. */
  private carriedImages(): number[] {
    return refsOf(this.state.turn).map((r) => r.id);
  }

  /** After each LLM step and each tool result. */
  async save(): Promise<void> {
    await this.write(this.state);
    this.inputSaved = true;
  }

  /**
   * Whether this core no longer holds the session's lease (another core took it over, or an
   * erase removed it): what the turn's slot holds was never kept. A store that cannot tell: yes.
   */
  leaseLost(): boolean {
    try {
      return !this.store.leases.holds(this.key.userId, this.key.sessionId);
    } catch {
      return true;
    }
  }

  /** The turn is done: its messages (and memory entry) appended, its checkpoint gone, in one transaction. */
  async commit(memoryText: string | undefined): Promise<void> {
    const { userId, sessionId } = this.key;
    const edit = this.state.replace_from_seq;
    const turn = {
      userId,
      sessionId,
      agent: this.state.agent,
      messages: this.state.turn.map(toStored),
      ...(edit !== undefined ? { replaceFromSeq: edit } : {}),
      ...(this.state.set_aside ? { setAside: true } : {}),
      ...(memoryText !== undefined ? { memoryText } : {}),
      at: this.now(),
      since: this.mark.since,
      owner: this.mark.owner,
      imageTokens: this.images.measured,
    };
    // An edit erases the tail it replaces (FTS5's secure-delete), and a long turn's text takes
    // FTS5 long to index: both off the loop (docs/agent.md "The store").
    if (edit !== undefined || indexesLong(turn)) await this.store.writeOffLoop({ kind: "commit", turn });
    else await this.store.write(() => this.store.conversations.commitTurn(turn));
  }

  /**
   * A refused turn changes nothing: the checkpoint goes back to how the turn found it, and the
   * images it staged are erased as an edit's are (pages rewritten, the log emptied): a photo
   * sent to a model that reads none stayed whole in the database's log.
   */
  async putBack(): Promise<void> {
    const { userId, sessionId } = this.key;
    if (this.prior) {
      const prior = stateOf(this.prior);
      // Its input is another turn's: written again with it. The images it does not name dropped
      // in the same write, under the same checks: never another core's turn's.
      this.inputSaved = false;
      await this.write(
        prior,
        refsOf(prior.turn).map((r) => r.id),
      );
    } else
      await this.store.write(() => this.store.conversations.clearCheckpoint(userId, sessionId, this.mark));
    // One that cannot run now stays owed (the next erase or open does it): the refusal still goes.
    if (this.newImages.length > 0)
      await this.store.settleOwed().catch((err) => stillOwed("a refused turn's images", err));
  }

  /**
   * A write waits (off the event loop) while another core holds the database's lock. With
   * `keepStaged`, the staged images not named there are dropped in it.
   */
  private async write(state: TurnState, keepStaged?: readonly number[], signal?: AbortSignal): Promise<void> {
    const body = this.checkpointWrite(state);
    const { key, mark } = this;
    // One that writes a long input kept apart: on the store's thread, its checks in its transaction.
    if (typeof body.input === "object") {
      const work = {
        kind: "checkpoint" as const,
        key,
        write: body,
        at: this.now(),
        mark,
        ...(keepStaged ? { keepStaged: [...keepStaged] } : {}),
        ...(this.rowOwed ? { opens: { agent: state.agent } } : {}),
      };
      await this.store.writeOffLoop(work, signal);
      this.rowOwed = false;
      return;
    }
    await this.store.write(() =>
      this.store.conversations.saveCheckpoint(key.userId, key.sessionId, body, this.now(), mark, keepStaged),
    );
  }

  /**
   * The checkpoint of `state` to write. A long input is kept apart (store/checkpoint.ts
   * `INPUT_APART_CHARS`): the turn's first save writes it, its later saves only the rest.
   */
  private checkpointWrite(state: TurnState): CheckpointWrite {
    const cp: Checkpoint = { version: 1, ...state, updated_at: this.now().toISOString() };
    if (state.user_input.length <= INPUT_APART_CHARS) return { body: checkpointBody(cp, false) };
    return { body: checkpointBody(cp, true), input: this.inputSaved ? "kept" : { text: state.user_input } };
  }
}

/** A turn's message as the store keeps it: the thinking sent back within the turn becomes its `reasoning`. */
function toStored(m: ChatMessage): TurnMessage {
  if (m.role !== "assistant" || m.reasoning_content === undefined) return m;
  const { reasoning_content: reasoning, ...message } = m;
  return { ...message, reasoning };
}

/** What a new turn starts from. */
export interface TurnStart {
  traceId: string;
  input: string;
  agent: string;
  /** The chat asked to continue the session's interrupted turn. */
  resume: boolean;
  /** An edit or a regenerate: the session's messages from this seq on are replaced. */
  replaceFromSeq?: number;
  /** The chat's images, checked (images/prepare.ts). */
  images?: readonly PreparedImage[];
  /** Images the turn's user message keeps from the one it replaces (a regenerate, an edit without new ones). */
  carried?: readonly AttachmentRef[];
}

/** The interrupted turn when the chat resumes it, else a fresh one (warning about what was set aside). */
function initialState(checkpoint: Checkpoint | undefined, start: TurnStart, warnings: Warning[]): TurnState {
  const fresh: TurnState = {
    trace_id: start.traceId,
    user_input: start.input,
    agent: start.agent,
    step: 0,
    parse_errors: 0,
    best_text: "",
    turn: [
      {
        role: "user" as const,
        content: start.input,
        ...(start.carried?.length ? { attachments: [...start.carried] } : {}),
      },
    ],
    ...(start.replaceFromSeq !== undefined ? { replace_from_seq: start.replaceFromSeq } : {}),
  };
  if (start.resume) {
    if (checkpoint) {
      logger.info(`trace=${start.traceId} resuming turn ${checkpoint.trace_id} at step ${checkpoint.step}`);
      return { ...stateOf(checkpoint), trace_id: start.traceId };
    }
    // A host recovering from a crash asks to resume a turn that had finished: with no input
    // there is nothing to run, and a blank user message would be a turn nobody asked for.
    if (start.input === "" && !start.images?.length)
      throw new CoreError(
        "invalid_request",
        "params.resume: the session has no interrupted turn to resume (its last turn finished, or it has none); read it with sessions.get",
        { field: "resume", reason: "nothing_to_resume" },
      );
    warnings.push({
      code: "nothing_to_resume",
      message: "resume was asked but the session has no interrupted turn; ran the input as a new turn",
    });
    return fresh;
  }
  if (checkpoint) {
    warnings.push({
      code: "checkpoint_discarded",
      // Cut between characters: half an emoji is a lone surrogate, a line a strict host cannot parse.
      message: `an interrupted turn ("${cutText(checkpoint.user_input, 60)}") was discarded because this chat did not ask to resume it`,
    });
  }
  return fresh;
}

/**
 * A checkpoint's turn state. A turn's only user message of the user's is its first: any later one
 * is the core's request to write again, which a core before the `by_core` mark saved unmarked.
 */
function stateOf(checkpoint: Checkpoint): TurnState {
  const { version: _v, updated_at: _u, ...state } = checkpoint;
  const turn = state.turn.map(
    (m, i): ChatMessage => (i > 0 && m.role === "user" ? { ...m, by_core: true } : m),
  );
  return { ...state, turn };
}
