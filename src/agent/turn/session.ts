import type { Warning } from "../../protocol/chat.ts";
import type { ChatMessage } from "../../store/chat-messages.ts";
import type { Checkpoint, SessionStore } from "../../store/session-store.ts";
import { logger } from "../../util/logger.ts";

/** The turn so far, as its checkpoint keeps it. */
export type TurnState = Omit<Checkpoint, "version" | "updated_at">;

/**
 * The session as one turn sees it: the history before the turn, the turn so far (the state
 * its checkpoint keeps, which the turn changes in place), and the writes that keep both.
 */
export class TurnSession {
  private constructor(
    private readonly store: SessionStore,
    readonly history: readonly ChatMessage[],
    readonly state: TurnState,
    /** The checkpoint as this turn found it, put back if the turn is refused. */
    private readonly prior: Checkpoint | undefined,
  ) {}

  /** Loads the history and any checkpoint (junk set aside, with a warning) and picks the state to run. */
  static open(store: SessionStore, start: TurnStart, warnings: Warning[]): TurnSession {
    const history = store.loadHistory(warnings);
    const prior = store.loadCheckpoint(warnings);
    return new TurnSession(store, history, initialState(prior, start, warnings), prior);
  }

  /**
   * The turn's first checkpoint, written now (a refused folder fails the chat before
   * run_start, as always) and made durable by `commitStaged` once the first request is on its
   * way: the fsyncs then overlap llama-server's prompt processing (docs/performance.md).
   */
  stage(): void {
    this.store.stageCheckpoint(this.state);
  }

  commitStaged(): void {
    this.store.commitStaged();
  }

  /** After each LLM step and each tool result. */
  save(): void {
    this.store.saveCheckpoint(this.state);
  }

  /** The turn is done: appended to the history, its checkpoint gone. */
  commit(): void {
    this.store.saveHistory([...this.history, ...this.state.turn]);
    this.store.clearCheckpoint();
  }

  /**
   * The turn stops unfinished: a checkpoint still staged (it ended before its first request:
   * cancelled while the model loads, no model) is put in place, so `resume` works as before.
   * The turn's own error is the one reported, not a failure of this write.
   */
  keep(): void {
    try {
      this.store.commitStaged();
    } catch {}
  }

  /** A refused turn changes nothing: the checkpoint goes back to how the turn found it. */
  putBack(): void {
    if (this.prior) {
      this.store.saveCheckpoint(stateOf(this.prior));
    } else {
      this.store.clearCheckpoint();
    }
  }
}

/** What a new turn starts from. */
export interface TurnStart {
  traceId: string;
  input: string;
  agent: string;
  /** The chat asked to continue the session's interrupted turn. */
  resume: boolean;
}

/** The interrupted turn when the chat resumes it, else a fresh one (warning about what was set aside). */
function initialState(checkpoint: Checkpoint | undefined, start: TurnStart, warnings: Warning[]): TurnState {
  const fresh = {
    trace_id: start.traceId,
    user_input: start.input,
    agent: start.agent,
    step: 0,
    parse_errors: 0,
    best_text: "",
    turn: [{ role: "user" as const, content: start.input }],
  };
  if (start.resume) {
    if (checkpoint) {
      logger.info(`trace=${start.traceId} resuming turn ${checkpoint.trace_id} at step ${checkpoint.step}`);
      return { ...stateOf(checkpoint), trace_id: start.traceId };
    }
    warnings.push({
      code: "nothing_to_resume",
      message: "resume was asked but the session has no interrupted turn; ran the input as a new turn",
    });
    return fresh;
  }
  if (checkpoint) {
    warnings.push({
      code: "checkpoint_discarded",
      message: `an interrupted turn ("${checkpoint.user_input.slice(0, 60)}") was discarded because this chat did not ask to resume it`,
    });
  }
  return fresh;
}

function stateOf(checkpoint: Checkpoint): TurnState {
  const { version: _v, updated_at: _u, ...state } = checkpoint;
  return state;
}
