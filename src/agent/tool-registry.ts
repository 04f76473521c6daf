import type { McpServerConfig } from "../config/schema.ts";
import { CoreError } from "../protocol/errors.ts";
import { quotedNames } from "../util/listed-names.ts";
import type { McpPool } from "./mcp/pool.ts";

/** One MCP tool as offered to the model. */
export interface AgentTool {
  /** The function name the model sees: `<server>__<tool>` (OpenAI names allow no dots). */
  fn: string;
  /** The name used in events and config: `<server>.<tool>`. */
  display: string;
  server: string;
  tool: string;
  description: string;
  parameters: Record<string, unknown>;
  requiresApproval: boolean;
}

export const FN_SEPARATOR = "__";

/** Which servers an agent's patterns (`server.tool`, `server.*`) need started. */
export function serversOf(patterns: readonly string[]): string[] {
  return [...new Set(patterns.map((p) => p.slice(0, p.indexOf("."))))];
}

function matches(pattern: string, server: string, tool: string): boolean {
  const dot = pattern.indexOf(".");
  const ps = pattern.slice(0, dot);
  const pt = pattern.slice(dot + 1);
  return ps === server && (pt === "*" || pt === tool);
}

/**
 * A server whose tools are not all offered: none (it failed), or some (`partial`: the rest are);
 * or (`approval`) its `requires_approval` naming a tool it does not list.
 */
export interface ToolFailure {
  server: string;
  message: string;
  partial?: boolean;
  approval?: boolean;
}

/**
 * Lists the tools an agent may use, starting the servers it names; a server that cannot start
 * (missing command, crash, startup_timeout_s) is reported in `failures`. A pattern naming a
 * server that is not configured is a config mistake the host must see, not a smaller toolset.
 */
export async function resolveTools(
  patterns: readonly string[],
  pool: McpPool,
  signal: AbortSignal,
): Promise<{ tools: AgentTool[]; failures: ToolFailure[] }> {
  const out: AgentTool[] = [];
  const failures: ToolFailure[] = [];
  const servers = serversOf(patterns);
  for (const server of servers) {
    if (pool.config(server)) continue;
    throw new CoreError(
      "config_invalid",
      `agent tool pattern names MCP server '${server}', which is not configured`,
      { key: "agents.tools" },
    );
  }
  // Started and listed together (each start bounded by its own startup_timeout_s): one after
  // another, a server that hung at start held back every server after it, and the turn paid the
  // sum. Read in the patterns' order all the same, so the tools' order does not vary.
  const listings = servers.map((server) =>
    pool.listing(server, signal).then(
      (listed) => ({ listed }),
      (err: unknown) => ({ err }),
    ),
  );
  for (const [i, server] of servers.entries()) {
    const cfg = pool.config(server) as McpServerConfig;
    const got = await (listings[i] as (typeof listings)[number]);
    if (!("listed" in got)) {
      // One broken server costs its own tools, not the others'.
      if (signal.aborted) throw signal.reason;
      failures.push({ server, message: (got.err as Error).message });
      continue;
    }
    const { listed } = got;
    // Tools it listed that are unfit to offer (tool-list.ts) cost a warning, not the chat.
    if (listed.dropped) failures.push({ server, message: listed.dropped, partial: true });
    // One left out as unfit is told above, by name: not a typo.
    const names = [...listed.tools.map((t) => t.name), ...(listed.unfit ?? [])];
    const unlisted = namedUnlisted(patterns, server, names);
    if (unlisted) failures.push({ server, message: unlisted, partial: true });
    // Only known now: a typo there guarded nothing, and the tool it meant ran unapproved unsaid.
    const unguarded = cfg.requires_approval.filter((n) => n !== "*" && !names.includes(n));
    if (unguarded.length > 0) failures.push({ server, message: quotedNames(unguarded), approval: true });
    for (const t of listed.tools) {
      if (!patterns.some((p) => matches(p, server, t.name))) continue;
      // `a` + `b__c` and `a__b` + `c` would be one function name: the first keeps it.
      const fn = `${server}${FN_SEPARATOR}${t.name}`;
      if (out.some((o) => o.fn === fn)) {
        const message = `its tool '${t.name}' was left out: '${fn}' is already another server's tool`;
        failures.push({ server, message, partial: true });
        continue;
      }
      out.push({
        fn,
        display: `${server}.${t.name}`,
        server,
        tool: t.name,
        description: t.description,
        parameters: t.inputSchema,
        requiresApproval: cfg.requires_approval.includes(t.name) || cfg.requires_approval.includes("*"),
      });
    }
  }
  return { tools: out, failures };
}

/**
 * The agent's patterns naming one tool of `server` that it does not list (`listed`: its tools' names), as a warning's words:
 * a typo or a renamed tool offered nothing, and without a word the model just had no such tool.
 * Undefined when each names a listed tool (or is `server.*`).
 */
function namedUnlisted(
  patterns: readonly string[],
  server: string,
  listed: readonly string[],
): string | undefined {
  const names = new Set(listed);
  const missing = patterns.filter((p) => {
    const dot = p.indexOf(".");
    const tool = p.slice(dot + 1);
    return p.slice(0, dot) === server && tool !== "*" && !names.has(tool);
  });
  if (missing.length === 0) return undefined;
  return `agents.tools names ${quotedNames(missing)}, not among its tools`;
}

/** A `tools` entry's function name (toOpenAiTools' shape); undefined for anything else. */
export function toolNameOf(tool: unknown): string | undefined {
  const name = (tool as { function?: { name?: unknown } } | null)?.function?.name;
  return typeof name === "string" ? name : undefined;
}

/** The `tools` array of the chat request. */
export function toOpenAiTools(tools: readonly AgentTool[]): unknown[] {
  return tools.map((t) => ({
    type: "function",
    function: { name: t.fn, description: t.description, parameters: t.parameters },
  }));
}
