import type { TurnMessage } from "../../store/conversations.ts";
import { estimateAll, estimateTokens } from "../context-budget.ts";
import { type AgentTool, toolNameOf } from "../tool-registry.ts";
import type { StepSetup } from "./llm-step.ts";

/** What the agent's tool definitions take of a prompt that did not fit, when they are why. */
export interface ToolsCost {
  /** About how many of the prompt's tokens the definitions take: the prompt's less the rest's estimate. */
  tokens: number;
  count: number;
  /** Per server, the most tokens first. */
  servers: { server: string; count: number; tokens: number }[];
}

/**
 * The tools' share of a prompt that did not fit the slot even without history, when they are
 * why it did not: the rest of it (`rest`: the system prompt and the turn's messages, estimated)
 * fits without them. Their tokens are the prompt's less the rest, shared among the servers by
 * the size of their definitions. Undefined when there are none, when the rest does not fit
 * either (then it is the input), or when the prompt's size is not known. `sent` is the
 * request's `tools`, each told to its server by its function name: not by its place, since those
 * llama-server refused are left out of it (tool-refusals.ts) and stay in `tools`.
 */
export function toolsOverflow(
  sent: readonly unknown[],
  tools: readonly AgentTool[],
  promptTokens: number | undefined,
  rest: number,
  slot: number,
): ToolsCost | undefined {
  if (sent.length === 0 || promptTokens === undefined || rest > slot) return undefined;
  const taken = promptTokens - rest;
  if (taken <= 0) return undefined;
  const sizes = sent.map((t) => estimateTokens(t));
  const all = sizes.reduce((a, b) => a + b, 0);
  const serverOf = new Map(tools.map((t) => [t.fn, t.server]));
  const byServer = new Map<string, { server: string; count: number; tokens: number }>();
  sizes.forEach((size, i) => {
    const server = serverOf.get(toolNameOf(sent[i]) ?? "") ?? "?";
    const entry = byServer.get(server) ?? { server, count: 0, tokens: 0 };
    entry.count++;
    entry.tokens += size;
    byServer.set(server, entry);
  });
  const servers = [...byServer.values()]
    .map((s) => ({ ...s, tokens: Math.round((s.tokens / all) * taken) }))
    .sort((a, b) => b.tokens - a.tokens);
  return { tokens: taken, count: sent.length, servers };
}

/** toolsOverflow for a step's setup and the turn's messages, the rest estimated as llm-step.ts does. */
export function overflowingTools(
  setup: StepSetup,
  turnState: TurnMessage[],
  tools: readonly AgentTool[],
  promptTokens: number | undefined,
  slot: number,
): ToolsCost | undefined {
  const turn = setup.layout.turnMessages(turnState);
  const rest = estimateTokens(setup.system) + estimateAll(turn) + setup.layout.turnImageCost(turn);
  return toolsOverflow(setup.tools, tools, promptTokens, rest, slot);
}

/** The servers that take most, for a message: at most three, then how many more. */
export function heaviest(cost: ToolsCost): string {
  const named = cost.servers
    .slice(0, 3)
    .map((s) => `'${s.server}' ${s.count} tools, about ${s.tokens} tokens`);
  const more = cost.servers.length - named.length;
  return named.join("; ") + (more > 0 ? `; ${more} more servers` : "");
}
