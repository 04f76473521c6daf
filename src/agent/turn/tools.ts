import type { ToolCall } from "../../protocol/chat-message.ts";
import { CoreError } from "../../protocol/errors.ts";
import { logger } from "../../util/logger.ts";
import { type AgentTool, resolveTools } from "../tool-registry.ts";
import { preview as previewOf, runTool, type ToolOutcome } from "../tool-runner.ts";
import { begin, type TurnContext } from "./context.ts";
import type { TurnState } from "./session.ts";

/**
 * The tools the agent may use. A server that cannot start costs its own tools and a
 * `tools_unavailable` warning; a pattern naming no configured server is the config's error.
 */
export async function loadTools(ctx: TurnContext): Promise<AgentTool[]> {
  const { agent, deps, warnings } = ctx;
  if (agent.tools.length === 0) return [];
  try {
    const { tools, failures } = await resolveTools(agent.tools, deps.pool, deps.signal);
    for (const f of failures) {
      warnings.push({
        code: "tools_unavailable",
        message: f.approval
          ? `requires_approval of MCP server '${f.server}' names ${f.message}, not among its tools: no tool needs approval for it (a typo, or a tool renamed?)`
          : f.partial
            ? `some tools of MCP server '${f.server}' were left out, the turn ran with the rest: ${f.message}`
            : `the tools of MCP server '${f.server}' could not be loaded, the turn ran without them: ${f.message}`,
      });
    }
    return tools;
  } catch (err) {
    if (deps.signal.aborted) throw deps.signal.reason;
    if (err instanceof CoreError && err.code === "config_invalid") throw err;
    const message = (err as Error).message;
    warnings.push({
      code: "tools_unavailable",
      message: `tools could not be loaded, the turn ran without them: ${message}`,
    });
    return [];
  }
}

/**
 * The calls of the last assistant message that have no result yet (all of them, or the rest
 * after a resume); undefined when that message made none.
 */
export function pendingCalls(state: TurnState): ToolCall[] | undefined {
  const lastAssistant = state.turn.findLastIndex((m) => m.role === "assistant");
  const msg = state.turn[lastAssistant];
  if (msg?.role !== "assistant" || !msg.tool_calls?.length) return undefined;
  const answered = new Set(
    state.turn.slice(lastAssistant + 1).flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])),
  );
  return msg.tool_calls.filter((tc) => !answered.has(tc.id));
}

/**
 * The step a turn begins in, the one a cancel before its first event names: a resume whose
 * interrupted step left calls unanswered is still in that step (they run first, under its
 * number), any other turn in the step it runs next.
 */
export function firstStep(state: TurnState): number {
  return pendingCalls(state)?.length ? Math.max(0, state.step - 1) : state.step;
}

/**
 * Calls run per step; a step asking for more gets the rest answered as not run. Real parallel
 * calls are a handful; thousands are a runaway model, and each call run rewrites the checkpoint
 * (the step's assistant message included), so the cap also bounds that cost to 64 rewrites a
 * step (docs/agent.md#tool-calls).
 */
export const MAX_CALLS_PER_STEP = 64;

/**
 * Runs the calls one by one, each result added to the turn and checkpointed as it comes, with a
 * turn of the event loop between them: a denied call or a failed server answers at once, and a
 * run of those on microtasks alone would keep `ping` and `cancel` from being read.
 */
export async function runCalls(
  ctx: TurnContext,
  tools: readonly AgentTool[],
  calls: readonly ToolCall[],
  step: number,
): Promise<void> {
  const { deps, session } = ctx;
  const beyond = overLimit(session.state);
  for (const tc of calls) {
    if (beyond.has(tc)) continue;
    deps.signal.throwIfAborted();
    const outcome = await runCall(ctx, tools, tc, step);
    session.state.turn.push({ role: "tool", tool_call_id: tc.id, content: outcome.content });
    await session.save();
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  const skipped = calls.filter((tc) => beyond.has(tc));
  if (skipped.length === 0) return;
  deps.signal.throwIfAborted();
  logger.info(`trace=${ctx.traceId} step=${step} ${skipped.length} tool calls over the limit not run`);
  const content = `Not run: a step may make at most ${MAX_CALLS_PER_STEP} tool calls. Call it again in a later step if it is still needed.`;
  for (const tc of skipped) session.state.turn.push({ role: "tool", tool_call_id: tc.id, content });
  await session.save();
}

/** The calls of the last assistant message past MAX_CALLS_PER_STEP (the objects pendingCalls returns). */
function overLimit(state: TurnState): ReadonlySet<ToolCall> {
  const msg = state.turn.findLast((m) => m.role === "assistant");
  const all = msg?.role === "assistant" ? (msg.tool_calls ?? []) : [];
  return new Set(all.slice(MAX_CALLS_PER_STEP));
}

/** One call: `tool_start`, the tool (or its refusal), `tool_done`. */
async function runCall(
  ctx: TurnContext,
  tools: readonly AgentTool[],
  tc: ToolCall,
  step: number,
): Promise<ToolOutcome> {
  const { deps } = ctx;
  const tool = tools.find((t) => t.fn === tc.function.name);
  let args: Record<string, unknown> = {};
  try {
    args = JSON.parse(tc.function.arguments || "{}");
  } catch {
    // Checked when the call was made; an unreadable checkpoint entry runs with no arguments.
  }
  const display = tool?.display ?? tc.function.name;
  begin(deps, "tool_start", { step, tool: display, args });
  const started = Date.now();
  let outcome: ToolOutcome;
  try {
    outcome = tool
      ? await runTool(tool, args, {
          pool: deps.pool,
          approved: ctx.params.approve_execution,
          signal: deps.signal,
        })
      : unavailable(display);
  } catch (err) {
    // A cancel (the only throw): the host's tool_start still gets its end, at once, before
    // loop_abort; the server was told to stop and is not waited for. It says what stopped the
    // chat: the host's cancel, a delete of its session, a forced unload of its model, a shutdown.
    const ms = Math.max(0, Date.now() - started);
    const preview = deps.signal.aborted ? stoppedBy(deps.signal) : "failed: the turn stopped";
    deps.emit("tool_done", { step, tool: display, status: "error", preview, retryable: false, ms });
    throw err;
  }
  deps.emit("tool_done", {
    step,
    tool: display,
    status: outcome.status,
    preview: outcome.preview,
    retryable: outcome.retryable,
    ms: outcome.ms,
  });
  return outcome;
}

/** `cancelled: ` and the abort's own words (a CoreError's message), cut to a preview's length. */
function stoppedBy(signal: AbortSignal): string {
  const reason: unknown = signal.reason;
  return previewOf(`cancelled: ${reason instanceof Error ? reason.message : String(reason)}`);
}

function unavailable(display: string): ToolOutcome {
  return {
    status: "error",
    content: `The tool ${display} is not available.`,
    preview: "tool not available",
    retryable: false,
    ms: 0,
  };
}
