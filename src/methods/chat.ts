import { randomInt } from "node:crypto";
import { runTurn } from "../agent/turn/run-turn.ts";
import { ChatEventFields, ChatParamsSchema, ChatResultSchema } from "../protocol/chat.ts";
import { defineMethod } from "./definition.ts";

function randomId(length: number, alphabet: string): string {
  let s = "";
  for (let i = 0; i < length; i++) s += alphabet[randomInt(alphabet.length)];
  return s;
}

/**
 * One agent turn (docs/protocol.md#chat, docs/agent.md): streams the chat events, ends with the
 * turn's result.
 */
export const chat = defineMethod({
  name: "chat",
  cancellable: true,
  params: ChatParamsSchema,
  result: () => ChatResultSchema,
  events: () => ChatEventFields,
  run: async (params, ctx, services) => {
    const config = services.config();
    const result = await runTurn(params, {
      config,
      dataDir: config.app.data_dir,
      provider: services.llama(),
      // On first use: the MCP SDK costs a cold chat tens of ms, and an agent without tools never needs it.
      get pool() {
        return services.mcp();
      },
      locks: services.sessionLocks(),
      store: () => services.store(),
      reuse: services.promptReuse(),
      emit: (event, fields) => ctx.emit(event, fields),
      signal: ctx.signal,
      settle: () => ctx.settle(),
      randomId,
      now: () => new Date(),
    });
    return { ...result, dropped_events: ctx.droppedEvents };
  },
});
