import { randomInt } from "node:crypto";
import { pickAgent } from "../agent/turn/pick-agent.ts";
import { isRewrite, takePlace } from "../agent/turn/rewrite.ts";
import { spawnedWithin } from "../agent/turn/spawn-wait.ts";
import { answeringFiles, chooseChatModel, type ModelChoice, shownName } from "../config/choose-model.ts";
import { modelConfig } from "../config/model-entry.ts";
import { configReadsNoImages } from "../config/reads-images.ts";
import type { Config } from "../config/schema.ts";
import { modelFiles } from "../models/model-files.ts";
import { ChatEventFields, type ChatParams, ChatParamsSchema, ChatResultSchema } from "../protocol/chat.ts";
import type { LlamaProvider, StartTicket } from "../runtime/endpoint.ts";
import type { Place } from "../store/keyed-mutex.ts";
import { abortable } from "../util/abortable.ts";
import { defineMethod } from "./definition.ts";
import { modelsApi } from "./models-api.ts";

/**
 * A plain chat starts llama-server before the turn's modules load (images are checked first and
 * a rewrite refused or not: the turn begins the start for those), and a first chat's modules
 * (~20 ms of evaluation on the one thread) are loaded once it has spawned: evaluated at once,
 * they held up the start's own steps before the spawn (the reap, the plan's probe), each an await
 * behind them (docs/performance.md, "A cold chat's way to the spawn"). The turn waits for that
 * spawn anyway (run-turn.ts `begunStart`). Cancelled meanwhile, the turn does not begin.
 */
async function startSpawned(
  params: ChatParams,
  provider: Pick<LlamaProvider, "prestart">,
  signal: AbortSignal,
): Promise<StartTicket | null | undefined> {
  const plain = !params.images?.length && !isRewrite(params);
  const prestarted = plain ? (provider.prestart?.() ?? null) : undefined;
  if (prestarted) await spawnedWithin(prestarted, signal);
  signal.throwIfAborted();
  return prestarted;
}

function randomId(length: number, alphabet: string): string {
  let s = "";
  for (let i = 0; i < length; i++) s += alphabet[randomInt(alphabet.length)];
  return s;
}

/** The chat's model; a path's drive is asked off the loop first (a dead network mount held the core: choose-model.ts). */
async function chatModel(params: ChatParams, config: Config, signal: AbortSignal): Promise<ModelChoice> {
  const agent = pickAgent(config, params.agent);
  const files = await answeringFiles(config, params.model ?? agent?.model, modelFiles, signal);
  signal.throwIfAborted();
  return chooseChatModel(config, params.model, agent, files);
}

/**
 * One agent turn (docs/protocol.md#chat, docs/agent.md): streams the chat events, ends with the
 * turn's result. The model is the param's, else the agent's, else `default` (docs/models.md,
 * "Several models"); any but `default` needs a core that serves several models, whose scheduler
 * then leases the turn's slot (loading the model, making room or waiting for it).
 */
export const chat = defineMethod({
  name: "chat",
  cancellable: true,
  params: ChatParamsSchema,
  result: () => ChatResultSchema,
  events: () => ChatEventFields,
  run: async (params, ctx, services) => {
    // Cancelled while this module loaded (docs/protocol.md#cancel): the spawn below must not begin.
    ctx.signal.throwIfAborted();
    const config = services.config();
    const model = await chatModel(params, config, ctx.signal);
    const several = model.name === "default" ? services.models?.() : modelsApi(services, model.name);
    // Memory's vectors (docs/agent.md, "Memory"): the query embedded for recall, the turn's row after it.
    const index = config.memory.enabled ? services.memoryIndex?.() : undefined;
    const provider = several ? several.provider(model) : services.llama();
    // The chat is its model's user from here, before anything yields: an unload right after it is
    // refused model_busy, a forced one ends it `cancelled` (docs/protocol.md#modelsunload).
    const watch = several?.chatSignal(model, ctx.signal);
    // Its first request's connection, opened now to a server that serves: the connect is made
    // while the turn takes its session and slot (docs/performance.md, "The connection opened ahead").
    const spare = provider.connectAhead?.();
    // A delete of the named session (or of the user, for a chat naming none) answered from its
    // arrival on stops the chat wherever it waits (its images' room, the modules, the spawn, its
    // line), not only once the turn has begun: it would otherwise write the session back
    // (docs/agent.md, The store).
    const erased = services.erasing.signal(params.user_id, params.session_id);
    const signal = AbortSignal.any([watch?.signal ?? ctx.signal, erased.signal]);
    let place: Place | undefined;
    const edit = { done: false, quoted: false };
    // Memory's job takes free room only while chats run (store/embed-room.ts): the chat's model stays.
    // Counted by the core (services.ts `chatBegan`): a job made while it runs knows it runs too.
    const ended = services.chatBegan ? services.chatBegan() : index?.chatBegan();
    try {
      // In the session's line first, as the chat arrives: what follows may wait (the modules, the spawn).
      if (params.session_id !== undefined)
        place = takePlace(params, services.sessionLocks(), signal, params.session_id);
      const prestarted = await startSpawned(params, provider, signal);
      // A database from before this version is brought up to date on its thread first (the
      // turn opens the store at once): begun here if the read-ahead has not, a cancel heard.
      await abortable(services.storeReady(), signal);
      // Made over the store: asked while its migrations ran, it was none (memoryIndex catches the refusal).
      const recall = index ?? (config.memory.enabled ? services.memoryIndex?.() : undefined);
      const { runTurn } = await import("../agent/turn/run-turn.ts");
      const result = await runTurn(params, {
        config,
        dataDir: config.app.data_dir,
        provider,
        // Its config says no projector (a path's is its own, `auto`), else its serving server's /props (docs/protocol.md#images).
        readsImages: () =>
          configReadsNoImages(modelConfig(config, model.name)) ? false : provider.readsImages?.(),
        prestarted,
        spare,
        // On first use: the MCP SDK costs a cold chat tens of ms, and an agent without tools never needs it.
        get pool() {
          return services.mcp();
        },
        locks: services.sessionLocks(),
        ...(place ? { place } : {}),
        store: () => services.store(),
        erasing: services.erasing,
        reuse: services.promptReuse(model.name),
        ...(recall
          ? { embedQuery: (text: string, signal: AbortSignal) => recall.queryVector(text, signal) }
          : {}),
        emit: (event, fields) => ctx.emit(event, fields),
        signal,
        settle: () => ctx.settle(),
        randomId,
        now: () => new Date(),
        edited: (quoted) => Object.assign(edit, { done: true, quoted }),
      });
      // The tail the edit erased is in the saved KV state too (docs/agent.md#prompt-reuse): the
      // session's own state from before it, and other sessions' that quote it in memory notes;
      // what stays is logged and retried there (server/kv-erase.ts `edited`), the answer stands.
      if (edit.done) services.forgetEditedKv?.(params.user_id, result.session_id, model.name, edit.quoted);
      return { ...result, model: shownName(model), dropped_events: ctx.droppedEvents };
    } finally {
      // The turn gave the session back; one that ended before it ran leaves the line here.
      place?.leave();
      erased.unwatch();
      spare?.close();
      watch?.done();
      // After the result: the job waits a moment, so the result goes out before any embedding.
      ended?.();
    }
  },
});
