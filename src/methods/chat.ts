import { randomInt } from "node:crypto";
import { runTurn } from "../agent/loop.ts";
import { McpPool } from "../agent/mcp-pool.ts";
import { ChatParamsSchema } from "../protocol/chat.ts";
import type { LlamaProvider } from "../runtime/endpoint.ts";
import { llamaProvider } from "../runtime/provider.ts";
import type { Core } from "../server/core.ts";
import { KeyedMutex } from "../store/keyed-mutex.ts";
import { userMemory } from "../store/user-memory.ts";
import { defineMethod } from "./types.ts";

function randomId(length: number, alphabet: string): string {
  let s = "";
  for (let i = 0; i < length; i++) s += alphabet[randomInt(alphabet.length)];
  return s;
}

/** The chat method, with the llama-server provider injectable for tests. */
export function chatMethod(options: { provider: (core: Core) => LlamaProvider }) {
  return defineMethod({
    name: "chat",
    params: ChatParamsSchema,
    run: async (params, ctx) => {
      const { config } = ctx.core.config();
      const provider = options.provider(ctx.core);
      const pool = ctx.core.service(
        "mcp",
        () => new McpPool(config.mcp_servers, Date.now, config.app.data_dir),
        (p) => p.close(),
      );
      const locks = ctx.core.service("session-locks", () => new KeyedMutex());
      const result = await runTurn(params, {
        config,
        dataDir: config.app.data_dir,
        provider,
        pool,
        locks,
        memory: (userId) => userMemory(ctx.core, userId),
        emit: (event, fields) => ctx.emit(event, fields),
        signal: ctx.signal,
        settle: () => (ctx.settle ? ctx.settle() : !ctx.signal.aborted),
        randomId,
        now: () => new Date(),
      });
      return { ...result, dropped_events: ctx.droppedEvents };
    },
  });
}

export const chat = chatMethod({ provider: llamaProvider });
