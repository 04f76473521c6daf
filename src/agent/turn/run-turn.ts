import { type HeldRoom, holdImages } from "../../images/held.ts";
import { prepareImages } from "../../images/prepare.ts";
import type { ChatParams, Warning } from "../../protocol/chat.ts";
import type { StartTicket } from "../../runtime/endpoint.ts";
import { dataDirError } from "../../store/data-dir-problem.ts";
import type { TurnContext, TurnDeps } from "./context.ts";
import type { TurnResult } from "./ending.ts";
import { notVision } from "./images.ts";
import { pickAgent } from "./pick-agent.ts";
import { hasInterruptedTurn } from "./read-checkpoint.ts";
import { checkRewriteParams, isRewrite, planRewrite, takePlace, turnInFlight } from "./rewrite.ts";
import { TurnSession } from "./session.ts";
import { spawnedWithin } from "./spawn-wait.ts";
import { firstStep } from "./tools.ts";
import { Turn } from "./turn.ts";
import { TurnUsage } from "./usage.ts";

/** One agent turn (docs/agent.md). Returns the result without `dropped_events` (the method adds it). */
export async function runTurn(params: ChatParams, deps: TurnDeps): Promise<TurnResult> {
  // A model known to read none: refused before its images are read, held or stored (a resume
  // may ignore them: its checkpoint decides, and the turn's own check refuses what it sends).
  if (params.images?.length && params.resume !== true && deps.readsImages?.() === false) throw notVision();
  // Its images hold their room in memory until the turn ends: chats with many wait their turn.
  const held = params.images?.length
    ? await holdImages(params.images, deps.config.app.max_images, deps.signal)
    : undefined;
  try {
    return await runHeldTurn(params, deps, held);
  } finally {
    held?.release();
  }
}

async function runHeldTurn(
  params: ChatParams,
  deps: TurnDeps,
  held: HeldRoom | undefined,
): Promise<TurnResult> {
  const { config, signal } = deps;
  const agent = pickAgent(config, params.agent);
  const sessionId = params.session_id ?? deps.randomId(8, "abcdefghijklmnopqrstuvwxyz0123456789");
  const traceId = deps.randomId(16, "0123456789abcdef");
  checkRewriteParams(params);
  // A resume's are read once its session's place is held (`resumeImages`), then the start begun.
  const later = params.resume === true && !!params.images?.length;
  const checked = later ? undefined : await imagesOf(params, config, held, signal);
  const rewriting = isRewrite(params);
  // A session the host named is watched, and its place in line taken, from the chat's arrival
  // (methods/chat.ts: a delete aborts `deps.signal`); one named here, from now.
  const erased = params.session_id === undefined ? deps.erasing.signal(params.user_id, sessionId) : undefined;
  const turnSignal = erased ? AbortSignal.any([signal, erased.signal]) : signal;
  const place = deps.place ?? takePlace(params, deps.locks, turnSignal, sessionId);
  let unlock: (() => void) | undefined;
  let unlease: (() => void) | undefined;
  try {
    // The model starts loading now, while the session, memory and tools are prepared; the turn
    // hears its progress once it asks for the server (after run_start, as the protocol orders).
    // The steps up to the spawn go first (on one thread, the turn's own work would otherwise
    // run between them); the turn's preparation then overlaps the load. In the session's line
    // meanwhile: a chat sent after this one, which waits for no spawn, runs after it.
    let prestarted = later ? undefined : await begunStart(deps);
    const store = deps.store();
    unlock = await place.granted;
    const warnings: Warning[] = [];
    const key = { userId: params.user_id, sessionId };
    const images = checked ?? (await resumeImages(params, deps, held, turnSignal, store, key));
    if (later) prestarted = await begunStart(deps);
    // The session is read and the turn's first checkpoint written in the write that takes the
    // session's lease. Another core on the same data folder may be running a turn of it: this
    // one waits for it (a rewrite is refused instead: what it would replace may be changing).
    const begin = () => {
      const rewrite = planRewrite(params, store, key);
      const start = {
        traceId,
        input: rewrite?.input ?? params.input,
        agent: agent.name,
        resume: params.resume,
        ...(rewrite ? { replaceFromSeq: rewrite.replaceFromSeq, carried: rewrite.carried } : {}),
        images,
      };
      return TurnSession.begin(store, key, start, warnings, deps.now);
    };
    // A session this chat named (its id made just now) has no history to read ahead.
    const fresh = params.session_id === undefined;
    const leased = await leaseSession(store, key, { rewriting, fresh }, turnSignal, begin);
    if (!leased) throw turnInFlight(sessionId);
    unlease = leased.release;
    const session = await leased.value.firstWrite(turnSignal);
    // Over `deps`, not a copy of it: a spread would run its lazy getters (the MCP pool).
    const turnDeps: TurnDeps = Object.create(deps, { signal: { value: turnSignal, enumerable: true } });
    const ctx: TurnContext = {
      params,
      deps: turnDeps,
      agent,
      sessionId,
      traceId,
      warnings,
      session,
      step: firstStep(session.state),
      usage: new TurnUsage(),
      sources: [],
    };
    return await new Turn(ctx, prestarted).run();
  } catch (err) {
    // A folder the core cannot write is the host's to fix: name it, not "see the log".
    throw dataDirError(err, deps.dataDir) ?? err;
  } finally {
    erased?.unwatch();
    unlease?.();
    if (unlock) unlock();
    else place.leave();
  }
}

/**
 * The session's lease, `begin` run in its write (a rewrite's refused while another core holds
 * it: undefined). The history of a session the host named is read first, a page a turn of the
 * loop, into the cache that write reads from: read whole there, 100k messages held ping and
 * cancel (docs/agent.md "The store", History reads). A failure there is met again by that read, which names it; a cancel,
 * by the lease's wait.
 */
async function leaseSession<T>(
  store: ReturnType<TurnDeps["store"]>,
  key: { userId: string; sessionId: string },
  { rewriting, fresh }: { rewriting: boolean; fresh: boolean },
  signal: AbortSignal,
  begin: () => T,
) {
  // Not for a fresh session: nothing to page, and its stamps and a wait of the loop were ~0.08 ms
  // of each such chat (docs/performance.md, "The core's own path against 2026-12-05's build").
  if (!fresh)
    await store.conversations.histories.load(key.userId, key.sessionId, signal).catch(() => undefined);
  return rewriting
    ? await store.tryLease(key.userId, key.sessionId, signal, begin)
    : await store.lease(key.userId, key.sessionId, signal, begin);
}

/** Every image checked before anything starts: a refusal costs no model load (docs/protocol.md#images). */
function imagesOf(
  params: ChatParams,
  config: TurnDeps["config"],
  held: HeldRoom | undefined,
  signal: AbortSignal,
) {
  if (!params.images?.length) return Promise.resolve([]);
  return prepareImages(params.images, {
    maxImages: config.app.max_images,
    maxPixels: config.app.max_image_pixels,
    // Each read holds its room until it ends, past a cancel (images/held.ts).
    ...(held ? { room: held.room, track: held.track, readBytes: held.readBytes } : {}),
    signal,
  });
}

/**
 * A resume's images: none where it resumes an interrupted turn, which sends its own again (they
 * are ignored, docs/protocol.md: a stale path among them refused the resume); read and checked
 * where it runs as a new turn, refused unread for a model known to read none, as `runTurn`
 * refuses another chat's (the turn's own check came after the model's start). Asked with the
 * session's place held, so no turn of this core ends or leaves a checkpoint in between.
 */
function resumeImages(
  params: ChatParams,
  deps: TurnDeps,
  held: HeldRoom | undefined,
  signal: AbortSignal,
  store: ReturnType<TurnDeps["store"]>,
  key: { userId: string; sessionId: string },
) {
  // A checkpoint that does not read is dropped and the chat runs as a new turn: its images count.
  const interrupted = store.guard(() => hasInterruptedTurn(store, key));
  if (!interrupted) {
    if (params.images?.length && deps.readsImages?.() === false) throw notVision();
    return imagesOf(params, deps.config, held, signal);
  }
  // Never read: the room taken for them goes back now, not at the end of the resumed turn.
  for (const [i] of held?.room.entries() ?? []) held?.readBytes(i, 0);
  return Promise.resolve([]);
}

/** The start the chat method began (null: there was none to begin), else the one begun now. */
function startOf(deps: TurnDeps): StartTicket | undefined {
  return deps.prestarted === undefined ? deps.provider.prestart?.() : (deps.prestarted ?? undefined);
}

/**
 * The turn's start (`startOf`), waited for until it has spawned, SPAWN_WAIT_MS at most. Cancelled
 * by then (the wait cut, or the modules loading), the turn ends before it opens the database.
 */
async function begunStart(deps: TurnDeps): Promise<StartTicket | undefined> {
  const ticket = startOf(deps);
  if (ticket) await spawnedWithin(ticket, deps.signal);
  deps.signal.throwIfAborted();
  return ticket;
}
