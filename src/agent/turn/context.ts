import type { AgentConfig, Config } from "../../config/schema.ts";
import type { SpareConnection } from "../../llama/spare-connection.ts";
import type { ChatEvents, ChatParams, Warning } from "../../protocol/chat.ts";
import type { RequestContext } from "../../protocol/method-table.ts";
import type { Source } from "../../protocol/sources.ts";
import type { LlamaProvider, StartTicket } from "../../runtime/endpoint.ts";
import type { ErasureWatch } from "../../store/erasures.ts";
import type { KeyedMutex, Place } from "../../store/keyed-mutex.ts";
import type { QueryVector } from "../../store/memory-vectors.ts";
import type { Store } from "../../store/store.ts";
import type { PromptReuse } from "../kv/reuse.ts";
import type { McpPool } from "../mcp/pool.ts";
import type { TurnSession } from "./session.ts";
import type { TurnUsage } from "./usage.ts";

/** What a turn is given by the chat method: the core's services and the request's own edges. */
export interface TurnDeps {
  config: Config;
  /** Absolute data directory. */
  dataDir: string;
  provider: LlamaProvider;
  /**
   * False when the chat's model is known to read no images without asking it (its config, or
   * its serving server's /props): its images are then refused unread. Absent: not known.
   */
  readsImages?: () => boolean | undefined;
  /**
   * The start the chat method began before it loaded the turn's modules (a cold chat's spawn
   * first: docs/performance.md, "A cold chat's way to the spawn"), null when it asked and there
   * was none to begin; absent, the turn asks.
   */
  prestarted?: StartTicket | null;
  /** A connection opened to the serving llama-server as the chat arrived, for its first request (llama/spare-connection.ts). */
  spare?: SpareConnection;
  pool: McpPool;
  locks: KeyedMutex;
  /** The chat's place in its session's line, taken as it arrived (rewrite.ts `takePlace`); absent, the turn takes it. */
  place?: Place;
  /** The conversation database (sessions, checkpoints, memory), opened on first need. */
  store(): Store;
  /** The process's erase watch (store/erasures.ts): a turn of a session it named itself watches here. */
  erasing: ErasureWatch;
  /**
   * Slots kept per session, prompt records, KV state on disk (docs/agent.md#prompt-reuse); absent:
   * none of it.
   */
  reuse?: PromptReuse;
  /**
   * The input's vector for recall (docs/agent.md, "Memory"); absent without an embedding model.
   * A failure or a slow answer leaves recall to words alone.
   */
  embedQuery?: (text: string, signal: AbortSignal) => Promise<QueryVector | undefined>;
  emit: RequestContext<ChatEvents>["emit"];
  signal: AbortSignal;
  /**
   * Claims the finish before the turn's terminal event and commit: false when a cancel got
   * there first (the turn then ends `cancelled`, uncommitted, resumable from its checkpoint).
   */
  settle(): boolean;
  randomId(length: number, alphabet: string): string;
  now(): Date;
  /**
   * The turn committed an edit (`replace_from`, `regenerate`, or a resume finishing one its own
   * chat left broken off), or set aside an interrupted turn: the chat method then erases the
   * saved KV state it replaced. `quoted`: an edit, whose erased passages other states may quote.
   */
  edited?(quoted: boolean): void;
}

/** What every part of one turn works with: the request, its agent, and what it has so far. */
export interface TurnContext {
  readonly params: ChatParams;
  readonly deps: TurnDeps;
  readonly agent: AgentConfig;
  readonly sessionId: string;
  readonly traceId: string;
  /** What the result tells the host, in the order it was found. */
  readonly warnings: Warning[];
  readonly session: TurnSession;
  /** The step being worked on: the one a cancel's `loop_abort` names. */
  step: number;
  /** The steps' token counts and timings so far. */
  readonly usage: TurnUsage;
  /** What memory recalled for this turn, cited in `memory_done`, the result and the stored answer. */
  sources: Source[];
}

/** The events that begin new work: none is sent once a cancel is answered. */
type Beginning = "memory_start" | "llm_start" | "tool_start";

/**
 * Emits an event that begins new work, unless the chat's signal has aborted: then it throws the
 * abort's reason, and the turn ends at once (a host told `{cancelled:true}` sees nothing start
 * after it: docs/protocol.md, the chat events).
 */
export function begin<K extends Beginning>(deps: TurnDeps, event: K, fields: ChatEvents[K]): void {
  deps.signal.throwIfAborted();
  deps.emit(event, fields);
}

/**
 * Tells the host how the wait for llama-server goes, while the chat's signal holds: a start's
 * progress can still arrive between a cancel and the wait's rejection, and a host told
 * `{cancelled:true}` hears of no new work (as `begin`).
 */
export function warmup(deps: TurnDeps): (p: ChatEvents["warmup_progress"]) => void {
  return (p) => {
    if (!deps.signal.aborted) deps.emit("warmup_progress", p);
  };
}
