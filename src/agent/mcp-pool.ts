import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { McpServerConfig } from "../config/schema.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import { removeRecordFile, writeMcpRecord } from "../runtime/pid-file.ts";
import { abortable } from "../util/abortable.ts";
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
  /** Its pid record (run/mcp/), so a core killed outright has it reaped by the next one. */
  record?: string | null;
}

/** How long a server that failed to start is left alone before a chat tries it again. */
export const RETRY_AFTER_MS = 30_000;

/**
 * The configured MCP stdio servers, each started on first use and kept for the core's life
 * (the composition root closes the pool at shutdown, so no server outlives the core). A server
 * whose connection closed (crash, exit) is started again on its next use.
 */
export class McpPool {
  private readonly connections = new Map<string, Promise<Connection>>();
  /** Servers being stopped after a failed start; close() waits for them too. */
  private readonly stopping = new Set<Promise<void>>();
  /** Servers still starting, killed at close() rather than waited for. */
  private readonly starting = new Set<StdioClientTransport>();
  private closed = false;
  /** The last failed start per server: chats in the next RETRY_AFTER_MS fail fast with it. */
  private readonly failures = new Map<string, { at: number; error: unknown }>();

  constructor(
    private readonly servers: readonly McpServerConfig[],
    private readonly now: () => number = Date.now,
    /** Where servers' pid records go (none without). */
    private readonly dataDir?: string,
  ) {}

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
    for (const t of this.starting) killPid(t.pid);
    const all = [...this.connections.values()];
    this.connections.clear();
    await Promise.all([
      ...this.stopping,
      ...all.map(async (p) => {
        try {
          const conn = await p;
          await conn.client.close();
          if (conn.record) removeRecordFile(conn.record); // exited, or SIGKILLed by the SDK
        } catch {
          // A server that never started or already died has nothing to close.
        }
      }),
    ]);
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
      // A server that just failed to start (a hang costs startup_timeout_s) is not retried by
      // every chat: for a while each one gets the same failure at once.
      const failed = this.failures.get(server);
      if (failed && this.now() - failed.at < RETRY_AFTER_MS) throw failed.error;
      pending = this.start(this.requireConfig(server));
      this.connections.set(server, pending);
      pending.then(
        () => this.failures.delete(server),
        (error) => {
          if (this.connections.get(server) === pending) this.connections.delete(server);
          if (!isCoreError(error) || error.code !== "cancelled")
            this.failures.set(server, { at: this.now(), error });
        },
      );
    }
    // A cancelled chat stops waiting for a slow start; the start itself is bounded by
    // startup_timeout_s and its server killed if it does not make it.
    return abortable(pending, signal);
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
      if (conn.record) removeRecordFile(conn.record);
      logger.info(`MCP server '${cfg.name}' disconnected; it will be restarted on next use`);
    };
    this.starting.add(transport);
    const limitMs = cfg.startup_timeout_s * 1000;
    const startTimeout = AbortSignal.timeout(limitMs);
    let pid: number | null = null;
    try {
      const connecting = client.connect(transport, { signal: startTimeout, timeout: limitMs });
      // Spawned synchronously by connect(); a failed connect clears transport.pid before we
      // could read it, and a hung server ignores the SDK's SIGTERM, so keep the pid now.
      pid = transport.pid;
      if (pid && this.dataDir)
        conn.record = writeMcpRecord(this.dataDir, {
          pid,
          name: cfg.name,
          binary: cfg.command,
          argv: cfg.args,
        });
      await connecting;
      const listed = await client.listTools(undefined, { signal: startTimeout, timeout: limitMs });
      conn.tools = listed.tools.map((t) => ({
        name: t.name,
        description: t.description ?? "",
        inputSchema: (t.inputSchema as Record<string, unknown>) ?? { type: "object" },
      }));
    } catch (err) {
      conn.alive = false;
      this.stopFailed(cfg.name, client, pid ?? transport.pid);
      if (conn.record) removeRecordFile(conn.record);
      if (startTimeout.aborted) {
        throw new CoreError(
          "internal_error",
          `MCP server '${cfg.name}' did not start within startup_timeout_s (${cfg.startup_timeout_s} s); it was stopped`,
          { server: cfg.name },
        );
      }
      throw new CoreError(
        "internal_error",
        `MCP server '${cfg.name}' could not be started: ${(err as Error).message}`,
        { server: cfg.name },
      );
    } finally {
      this.starting.delete(transport);
    }
    logger.info(`MCP server '${cfg.name}' started with ${conn.tools.length} tools`);
    return conn;
  }

  /**
   * Stops a server that failed to start. It has nothing worth a graceful exit, and one that
   * hangs may ignore stdin's end and SIGTERM, so it is killed outright before the transport
   * is closed; the chat does not wait for it, close() does.
   */
  private stopFailed(name: string, client: Client, pid: number | null): void {
    if (killPid(pid)) logger.info(`MCP server '${name}' (pid ${pid}) killed after a failed start`);
    const done: Promise<void> = client.close().then(
      () => {},
      () => {},
    );
    this.stopping.add(done);
    void done.finally(() => this.stopping.delete(done));
  }
}

function killPid(pid: number | null): boolean {
  if (pid === null) return false;
  try {
    process.kill(pid, "SIGKILL");
    return true;
  } catch {
    return false; // already gone
  }
}
