import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { McpServerConfig } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import { removeRecordFile, writeMcpRecord } from "../../runtime/pid-file.ts";
import { logger } from "../../util/logger.ts";
import { VERSION } from "../../version.ts";

export interface McpToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** A server that answered initialize and tools/list. */
export interface Connection {
  client: Client;
  tools: McpToolInfo[];
  /** Stops the server (stdin's end first, then signals) and removes its pid record. */
  close(): Promise<void>;
}

/** A start never rejects: a failed one has killed what it spawned; `stopped` settles once that is gone. */
export type StartOutcome =
  | { ok: true; conn: Connection }
  | { ok: false; error: CoreError; stopped: Promise<void> };

export interface StartOptions {
  /** Where the server's pid record goes (none without). */
  dataDir?: string;
  /** Aborted when the pool closes mid-start: the server is killed at once. */
  signal: AbortSignal;
  /** The connection closed: the server exited, crashed or was stopped. */
  onClose: (conn: Connection) => void;
}

/** Spawns one configured server, connects and lists its tools, within startup_timeout_s. */
export async function startServer(cfg: McpServerConfig, options: StartOptions): Promise<StartOutcome> {
  const transport = new StdioClientTransport({
    command: cfg.command,
    args: cfg.args,
    env: { ...getDefaultEnvironment(), ...cfg.env },
    cwd: cfg.cwd,
    stderr: "pipe",
  });
  transport.stderr?.on("data", (d: Buffer) => logger.debug(`[mcp ${cfg.name}] ${String(d).trimEnd()}`));
  const client = new Client({ name: "local-ai", version: VERSION });
  // Its pid record (run/mcp/), so a core killed outright has it reaped by the next one.
  let record: string | null = null;
  const conn: Connection = {
    client,
    tools: [],
    close: async () => {
      await client.close();
      if (record) removeRecordFile(record); // exited, or SIGKILLed by the SDK
    },
  };
  client.onclose = () => {
    if (record) removeRecordFile(record);
    logger.info(`MCP server '${cfg.name}' disconnected; it will be restarted on next use`);
    options.onClose(conn);
  };
  const limitMs = cfg.startup_timeout_s * 1000;
  const startTimeout = AbortSignal.timeout(limitMs);
  let pid: number | null = null;
  const killOnAbort = () => killPid(pid ?? transport.pid);
  try {
    const connecting = client.connect(transport, { signal: startTimeout, timeout: limitMs });
    // Spawned synchronously by connect(); a failed connect clears transport.pid before we
    // could read it, and a hung server ignores the SDK's SIGTERM, so keep the pid now.
    pid = transport.pid;
    options.signal.addEventListener("abort", killOnAbort, { once: true });
    if (pid && options.dataDir)
      record = writeMcpRecord(options.dataDir, { pid, name: cfg.name, binary: cfg.command, argv: cfg.args });
    await connecting;
    const listed = await client.listTools(undefined, { signal: startTimeout, timeout: limitMs });
    conn.tools = listed.tools.map((t) => ({
      name: t.name,
      description: t.description ?? "",
      inputSchema: (t.inputSchema as Record<string, unknown>) ?? { type: "object" },
    }));
  } catch (err) {
    const stopped = stopFailed(cfg.name, client, pid ?? transport.pid);
    if (record) removeRecordFile(record);
    return { ok: false, error: startError(cfg, err, startTimeout.aborted), stopped };
  } finally {
    options.signal.removeEventListener("abort", killOnAbort);
  }
  logger.info(`MCP server '${cfg.name}' started with ${conn.tools.length} tools`);
  return { ok: true, conn };
}

function startError(cfg: McpServerConfig, err: unknown, timedOut: boolean): CoreError {
  if (timedOut)
    return new CoreError(
      "internal_error",
      `MCP server '${cfg.name}' did not start within startup_timeout_s (${cfg.startup_timeout_s} s); it was stopped`,
      { server: cfg.name },
    );
  return new CoreError(
    "internal_error",
    `MCP server '${cfg.name}' could not be started: ${(err as Error).message}`,
    {
      server: cfg.name,
    },
  );
}

/**
 * Stops a server that failed to start. It has nothing worth a graceful exit, and one that
 * hangs may ignore stdin's end and SIGTERM, so it is killed outright before the transport
 * is closed; the chat does not wait for it, the pool's close() does.
 */
function stopFailed(name: string, client: Client, pid: number | null): Promise<void> {
  if (killPid(pid)) logger.info(`MCP server '${name}' (pid ${pid}) killed after a failed start`);
  return client.close().then(
    () => {},
    () => {},
  );
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
