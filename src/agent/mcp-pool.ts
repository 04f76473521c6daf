import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { McpServerConfig } from "../config/schema.ts";
import { CoreError } from "../protocol/errors.ts";
import { logger } from "../util/logger.ts";
import { VERSION } from "../version.ts";

export interface McpToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export interface McpCallOutcome {
  isError: boolean;
  text: string;
}

interface Connection {
  client: Client;
  transport: StdioClientTransport;
  tools: McpToolInfo[];
  alive: boolean;
}

/**
 * The configured MCP stdio servers, each started on first use and kept for the core's life
 * (a Core service, closed at shutdown so no server outlives the core). A server whose
 * connection closed (crash, exit) is started again on its next use.
 */
export class McpPool {
  private readonly connections = new Map<string, Promise<Connection>>();
  private closed = false;

  constructor(private readonly servers: readonly McpServerConfig[]) {}

  config(name: string): McpServerConfig | undefined {
    return this.servers.find((s) => s.name === name);
  }

  async tools(server: string, signal: AbortSignal): Promise<McpToolInfo[]> {
    return (await this.connection(server, signal)).tools;
  }

  async call(
    server: string,
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<McpCallOutcome> {
    const cfg = this.requireConfig(server);
    const conn = await this.connection(server, signal);
    const result = await conn.client.callTool({ name: tool, arguments: args }, undefined, {
      signal,
      timeout: cfg.timeout_s * 1000,
    });
    const parts = Array.isArray(result.content) ? result.content : [];
    const text = parts
      .map((p: { type?: string; text?: string }) =>
        p.type === "text" ? (p.text ?? "") : `[${p.type ?? "content"}]`,
      )
      .join("\n");
    const structured =
      text === "" && result.structuredContent ? JSON.stringify(result.structuredContent) : "";
    return { isError: result.isError === true, text: text || structured };
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(
      all.map(async (p) => {
        try {
          const conn = await p;
          await conn.client.close();
        } catch {
          // A server that never started or already died has nothing to close.
        }
      }),
    );
  }

  private requireConfig(server: string): McpServerConfig {
    const cfg = this.config(server);
    if (!cfg)
      throw new CoreError("invalid_request", `no MCP server named '${server}' in the config`, {
        field: "agents.tools",
      });
    return cfg;
  }

  private async connection(server: string, signal: AbortSignal): Promise<Connection> {
    if (this.closed) throw new CoreError("cancelled", "the core is shutting down");
    const existing = this.connections.get(server);
    if (existing) {
      const conn = await existing.catch(() => undefined);
      if (conn?.alive) return conn;
      if (this.connections.get(server) === existing) this.connections.delete(server);
    }
    let pending = this.connections.get(server);
    if (!pending) {
      pending = this.start(this.requireConfig(server));
      this.connections.set(server, pending);
      pending.catch(() => {
        if (this.connections.get(server) === pending) this.connections.delete(server);
      });
    }
    signal.throwIfAborted();
    return pending;
  }

  private async start(cfg: McpServerConfig): Promise<Connection> {
    const transport = new StdioClientTransport({
      command: cfg.command,
      args: cfg.args,
      env: { ...getDefaultEnvironment(), ...cfg.env },
      cwd: cfg.cwd,
      stderr: "pipe",
    });
    transport.stderr?.on("data", (d: Buffer) => logger.debug(`[mcp ${cfg.name}] ${String(d).trimEnd()}`));
    const client = new Client({ name: "local-ai", version: VERSION });
    const conn: Connection = { client, transport, tools: [], alive: true };
    client.onclose = () => {
      conn.alive = false;
      logger.info(`MCP server '${cfg.name}' disconnected; it will be restarted on next use`);
    };
    const startTimeout = AbortSignal.timeout(Math.max(10_000, cfg.timeout_s * 1000));
    try {
      await client.connect(transport, {
        signal: startTimeout,
        timeout: Math.max(10_000, cfg.timeout_s * 1000),
      });
      const listed = await client.listTools(undefined, { signal: startTimeout });
      conn.tools = listed.tools.map((t) => ({
        name: t.name,
        description: t.description ?? "",
        inputSchema: (t.inputSchema as Record<string, unknown>) ?? { type: "object" },
      }));
    } catch (err) {
      conn.alive = false;
      await client.close().catch(() => {});
      throw new CoreError(
        "internal_error",
        `MCP server '${cfg.name}' could not be started: ${(err as Error).message}`,
        {
          server: cfg.name,
        },
      );
    }
    logger.info(`MCP server '${cfg.name}' started with ${conn.tools.length} tools`);
    return conn;
  }
}
