import { isCoreError } from "../protocol/errors.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import type { McpPool } from "./mcp/pool.ts";
import type { AgentTool } from "./tool-registry.ts";

/** A tool result longer than this is cut before it reaches the model (and the history). */
export const TOOL_RESULT_LIMIT = 16_000;
/** `tool_done.preview` length. */
export const PREVIEW_CHARS = 200;

export interface ToolOutcome {
  status: "ok" | "error" | "denied";
  /** What the model reads in the tool message. */
  content: string;
  preview: string;
  retryable: boolean;
  ms: number;
}

/**
 * A tool's text as the model, the checkpoint and the history get it: at most `limit` characters,
 * and well-formed UTF-16. A lone surrogate (a cut through a pair, or one the server sent) would
 * go out as `\ud83d`, which llama-server's JSON parser refuses, failing every later step of the
 * session (docs/agent.md#mcp-servers).
 */
export function truncate(text: string, limit = TOOL_RESULT_LIMIT): string {
  if (text.length <= limit) return text.toWellFormed();
  const head = cutAt(text, limit);
  return `${head.toWellFormed()}\n[… truncated: ${text.length - head.length} more characters not shown]`;
}

export function preview(text: string): string {
  // Only the head matters; flattening megabytes of output to show 200 characters is waste.
  const flat = cutAt(text, PREVIEW_CHARS * 8)
    .replace(/\s+/g, " ")
    .trim();
  const shown = flat.length <= PREVIEW_CHARS ? flat : `${cutAt(flat, PREVIEW_CHARS - 1)}…`;
  return shown.toWellFormed();
}

/** The first `n` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair. */
function cutAt(text: string, n: number): string {
  return text.length <= n ? text : text.slice(0, wholeCharCut(text, n));
}

/** What a call runs under, by name. */
export interface RunToolOptions {
  pool: McpPool;
  /** The chat's `approve_execution`: a tool that requires approval runs only with it. */
  approved: boolean;
  /** The chat's abort; the only failure that propagates. */
  signal: AbortSignal;
  now?: () => number;
}

/**
 * Runs one call, or refuses it when the tool needs approval the chat did not give. Errors of
 * the tool or its server become a result the model can read; only the chat's own abort
 * propagates. `retryable` says whether the same call might succeed if tried again (a timeout
 * or a crashed server: yes; the tool reporting an error, the server answering that the call is
 * wrong (an unknown tool, invalid arguments: call-result.ts) or a denial: no).
 */
export async function runTool(
  tool: AgentTool,
  args: Record<string, unknown>,
  options: RunToolOptions,
): Promise<ToolOutcome> {
  const { pool, approved, signal, now = Date.now } = options;
  const started = now();
  const ms = () => Math.max(0, now() - started);
  if (tool.requiresApproval && !approved) {
    const content = `The tool ${tool.display} was not run: it requires the user's approval, which was not given for this request. Do not call it again; tell the user it needs approval.`;
    return {
      status: "denied",
      content,
      preview: "denied: requires approval (approve_execution is false)",
      retryable: false,
      ms: ms(),
    };
  }
  try {
    const out = await pool.call(tool.server, tool.tool, args, signal);
    const body = truncate(out.text);
    if (out.isError) {
      return {
        status: "error",
        content: `The tool reported an error: ${body}`,
        preview: preview(out.text),
        retryable: false,
        ms: ms(),
      };
    }
    return { status: "ok", content: body, preview: preview(out.text), retryable: false, ms: ms() };
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    const message = isCoreError(err) || err instanceof Error ? err.message : String(err);
    return {
      status: "error",
      content: `The tool could not be run: ${truncate(message)}`,
      preview: preview(message),
      // Asked here, not imported above: it brings the MCP SDK's schemas (~35 ms of a cold
      // core's first chat, evaluated while llama-server loads beside it), which a turn with no
      // tool call never needs; a call that went to a server has loaded it already.
      retryable: (await import("./mcp/call-result.ts")).mayRetry(err),
      ms: ms(),
    };
  }
}
