import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { jsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/types.js";
import { z } from "zod";
import type { McpServerConfig } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import { removeRecordFile, writeMcpRecord } from "../../runtime/pid-file.ts";
import { logger } from "../../util/logger.ts";
import { terminalText, terminalTextCut } from "../../util/terminal-text.ts";
import { cutText } from "../../util/text-cut.ts";
import { within } from "../../util/within.ts";
import { VERSION } from "../../version.ts";
import { type ChildExit, exitText, type McpChild, spawnWhenAnswered } from "./child.ts";
import { ChildTransport, MAX_PENDING_BYTES } from "./child-transport.ts";
import {
  commandLineOf,
  configSecrets,
  StderrDebugLog,
  StderrTail,
  withoutCutEnd,
  withoutSecrets,
} from "./stderr-tail.ts";
import {
  MAX_CURSOR_CHARS,
  MAX_LIST_PAGES,
  MAX_TOOLS_PER_SERVER,
  type McpToolInfo,
  vetTools,
} from "./tool-list.ts";
import { overspentWhy, type UnaskedBudget, type UnaskedLimits } from "./unasked-budget.ts";

/**
 * What the SDK checks a tool's structured result against its `outputSchema` with: nothing. The
 * schema is the server's, and the core offers it to no model (a result reaches the model as
 * text): left to the SDK's default (Ajv), every listing compiled each tool's schema on the main
 * loop, one that cannot compile (a remote $ref) failed the whole server, and a backtracking
 * `pattern` held the loop about 0.5 s for each string of a result checked against it (a hostile
 * review), with no ping or cancel read meanwhile. The listing (LISTED) no longer goes through
 * the SDK's listTools, which is what compiled them; this keeps any later use of it from doing so.
 */
const UNCHECKED: jsonSchemaValidator = {
  getValidator: () => (input) => ({ valid: true, data: input as never, errorMessage: undefined }),
};

/**
 * A tools/list result as the core reads it: each tool is vetted on its own (tool-list.ts), so
 * that one the SDK's ListToolsResultSchema refuses (a number for a name, an input schema that is
 * not an object's, a null description) costs its own place, not every tool of its server.
 */
const LISTED = z.looseObject({ tools: z.array(z.unknown()), nextCursor: z.unknown().optional() });

/**
 * Every page of the server's tools/list (MCP lists in pages: the tools past the first were never
 * offered), up to MAX_LIST_PAGES, or fewer once more tools than MAX_TOOLS_PER_SERVER came (the
 * vetting leaves those out, saying so). `unread`: why some pages were not read, or null.
 */
async function listPages(
  client: Client,
  options: { signal: AbortSignal; timeout: number },
  secrets: readonly string[],
): Promise<{ tools: unknown[]; unread: string | null }> {
  const tools: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const params = cursor === undefined ? {} : { params: { cursor } };
    let listed: z.infer<typeof LISTED>;
    try {
      listed = await client.request({ method: "tools/list", ...params }, LISTED, options);
    } catch (err) {
      // A later page the server refuses (a cursor it cannot take back): the pages read are
      // offered, as the first alone was before pages were read, rather than none.
      // The server's own error answer, not the start's clock, a cancel or a closed connection: told
      // by the connection still open, not by the code, since a server may answer -32000 (the SDK's
      // code for a closed connection, and the first of those left to servers) itself.
      const answered = !options.signal.aborted && err instanceof McpError && client.transport !== undefined;
      if (cursor === undefined || !answered) throw err;
      // Every chat's warning and the log quote it: its config's secrets go before the cut, and a
      // lone surrogate (a line a host's strict JSON reader refuses whole) after it (shown).
      const said = cutText(withoutSecrets((err as Error).message, secrets), 200).toWellFormed();
      return { tools, unread: `its page ${page + 1} was refused: ${terminalTextCut(said, 200)}` };
    }
    for (const tool of listed.tools) tools.push(tool);
    // An empty cursor is no next page: sent back, it asks for the first page again.
    cursor =
      typeof listed.nextCursor === "string" && listed.nextCursor !== "" ? listed.nextCursor : undefined;
    if (cursor === undefined || tools.length > MAX_TOOLS_PER_SERVER) return { tools, unread: null };
    if (cursor.length > MAX_CURSOR_CHARS)
      return { tools, unread: `its next page was not read: a cursor over ${MAX_CURSOR_CHARS} characters` };
  }
  return { tools, unread: `it listed more than the ${MAX_LIST_PAGES} pages read` };
}

/** A server that answered initialize and tools/list. */
export interface Connection {
  client: Client;
  tools: McpToolInfo[];
  /** Why some listed tools were left out (tool-list.ts), or null. */
  dropped: string | null;
  /** The names of those left out; absent: none. */
  unfit?: readonly string[];
  /**
   * Reads its tools again if it said they changed since they were read (watchToolList): the read
   * (never rejects; settles once `tools` is the new list or the old one kept), or undefined when
   * there is nothing to read.
   */
  refresh(): Promise<void> | undefined;
  /** Stops the server (stdin's end first, then signals) and removes its pid record. */
  close(): Promise<void>;
  /** SIGKILL now; the connection closes at once (onClose), logged with `why`. */
  kill(why: string): void;
  /** The `why` of the kill that ended it, if the core killed it. */
  stoppedFor(): string | undefined;
  /** How the server ended (`exited with code 3`), once it has (child.ts `exitText`). */
  exitedAs(): string | undefined;
  /** Tells the guard what the server started outside its group (child.ts `noteEscaped`). */
  noteEscaped(): void;
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
  /** Bytes that may wait for the server's stdin before it is killed (child-transport.ts). */
  maxPendingBytes?: number;
  /** What it may send that no call asked for before it is killed (unasked-budget.ts). */
  unasked?: UnaskedLimits;
}

/**
 * Spawns one configured server (under the guard where there is one: child.ts), connects and
 * lists its tools, within startup_timeout_s. Its pid record (run/mcp/), so that a core killed
 * outright has it reaped by the next one where no guard did, lasts as long as the process.
 */
export async function startServer(cfg: McpServerConfig, options: StartOptions): Promise<StartOutcome> {
  // Before the spawn: nothing that may throw stands between it and the child's being watched.
  const tail = new StderrTail(cfg.env, commandLineOf(cfg));
  let child: McpChild;
  try {
    const env = { ...getDefaultEnvironment(), ...cfg.env };
    const launch = { command: cfg.command, args: cfg.args, env, cwd: cfg.cwd };
    child = await spawnWhenAnswered(launch, options.signal);
  } catch (err) {
    return { ok: false, error: startError(cfg, err), stopped: Promise.resolve() };
  }
  const record = options.dataDir
    ? writeMcpRecord(options.dataDir, { pid: child.pid, name: cfg.name, binary: cfg.command, argv: cfg.args })
    : null;
  if (record) void child.exited.then(() => removeRecordFile(record));
  const client = new Client({ name: "local-ai", version: VERSION }, { jsonSchemaValidator: UNCHECKED });
  const transport = new ChildTransport(child, cfg.name, {
    maxPendingBytes: options.maxPendingBytes ?? MAX_PENDING_BYTES,
    stallMs: cfg.timeout_s * 1000,
    unasked: options.unasked,
  });
  const stderrRead = logStderr(
    child.stderr,
    tail,
    new StderrDebugLog((line) => logger.debug(`[mcp ${cfg.name}] ${line}`), cfg.env, commandLineOf(cfg)),
    // Its stdout's budget: with one each, a server could make the core read twice the rate.
    transport.budget,
    (why) => transport.kill(why),
  );
  const conn: Connection = {
    client,
    tools: [],
    dropped: null,
    refresh: () => undefined,
    close: () => client.close(),
    kill: (why) => transport.kill(why),
    stoppedFor: () => transport.stoppedFor,
    exitedAs: () => transport.exitedAs,
    noteEscaped: () => child.noteEscaped(),
  };
  // Heard from the first message: a change said while the start lists the tools is read again.
  watchToolList(cfg, conn);
  client.onclose = () => {
    logger.info(`MCP server '${cfg.name}' disconnected; it will be restarted on next use`);
    options.onClose(conn);
  };
  const limitMs = cfg.startup_timeout_s * 1000;
  const startTimeout = AbortSignal.timeout(limitMs);
  const killOnAbort = () => child.kill();
  options.signal.addEventListener("abort", killOnAbort, { once: true });
  try {
    await client.connect(transport, { signal: startTimeout, timeout: limitMs });
    await readTools(cfg, conn, startTimeout, limitMs);
    if (conn.dropped) logger.warn(`MCP server '${cfg.name}': ${conn.dropped}`);
  } catch (err) {
    const stopping = startTimeout.aborted || options.signal.aborted || transport.stoppedFor !== undefined;
    // Seen before the kill below, which would be its exit otherwise.
    const exit = stopping ? null : await exitOf(child, stderrRead);
    const stopped = stopFailed(cfg.name, child, client);
    if (record) removeRecordFile(record); // SIGKILLed: nothing left to reap
    const why = failure(err, exit, { cfg, tail, transport });
    return { ok: false, error: startError(cfg, why, startTimeout.aborted && transport.stray), stopped };
  } finally {
    options.signal.removeEventListener("abort", killOnAbort);
  }
  // What it started with itself (a browser at start-up) is noted now, the rest after its calls.
  child.noteEscaped();
  logger.info(`MCP server '${cfg.name}' started with ${conn.tools.length} tools`);
  return { ok: true, conn };
}

/**
 * `notifications/tools/list_changed` marks the list stale (it was read once a start, so a server
 * that added a tool had it offered only after a restart); it is read again at the next listing
 * (pool.ts, once a turn), not on each notification, which a server may send without end: with
 * the start's bounds on pages and tools, within timeout_s, listings at once sharing one read. A
 * read that fails keeps the tools read before (logged). A listing waits for it only briefly
 * (pool.ts RELIST_WAIT_MS); the read goes on, for later listings.
 */
function watchToolList(cfg: McpServerConfig, conn: Connection): void {
  let changed = false;
  let reading: Promise<void> | undefined;
  conn.client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changed = true;
  });
  conn.refresh = () => {
    if (reading || !changed) return reading;
    changed = false;
    reading = relist(cfg, conn).finally(() => {
      reading = undefined;
    });
    return reading;
  };
}

async function relist(cfg: McpServerConfig, conn: Connection): Promise<void> {
  const limitMs = cfg.timeout_s * 1000;
  try {
    await readTools(cfg, conn, AbortSignal.timeout(limitMs), limitMs);
    logger.info(`MCP server '${cfg.name}' listed ${conn.tools.length} tools again (its list changed)`);
  } catch (err) {
    logger.warn(
      `MCP server '${cfg.name}': its changed tool list could not be read (${shown(err, cfg)}); the tools read before are kept`,
    );
  }
}

/**
 * Lists `conn`'s tools and keeps those fit to offer. They are vetted over loop turns (tool-list.ts):
 * a server that exited meanwhile throws, as one exiting while it listed does. Taken, its start was
 * ready with its connection closed, a close the pool had heard while it started: never started
 * again, every call to it refused.
 */
async function readTools(cfg: McpServerConfig, conn: Connection, signal: AbortSignal, timeout: number) {
  const listed = await listPages(
    conn.client,
    { signal, timeout },
    configSecrets(cfg.env, commandLineOf(cfg)),
  );
  const vetted = await vetTools(listed.tools);
  if (!conn.client.transport) throw new Error("it closed its connection while its tools were vetted");
  [conn.tools, conn.unfit] = [vetted.tools, vetted.unfit];
  conn.dropped = [vetted.dropped, listed.unread].filter(Boolean).join("; ") || null;
}

/** `timedOut`: what it wrote on stdout that was no message (ChildTransport), when the start timed out. */
function startError(
  cfg: McpServerConfig,
  err: unknown,
  timedOut?: ChildTransport["stray"] | false,
): CoreError {
  if (timedOut)
    return new CoreError(
      "internal_error",
      `MCP server '${cfg.name}' did not start within startup_timeout_s (${cfg.startup_timeout_s} s); it was stopped${strayText(cfg, timedOut)}`,
      { server: cfg.name },
    );
  // An exit's own words (its code, its stderr's end) are bounded where they are made.
  const why = err instanceof ExitedAtStart ? err.message : shown(err, cfg);
  return new CoreError("internal_error", `MCP server '${cfg.name}' could not be started: ${why}`, {
    server: cfg.name,
  });
}

/** Characters of the first stray line quoted. */
const STRAY_SHOWN = 120;

/**
 * Lines on its stdout that were no JSON-RPC message, the first one quoted (its config's secrets
 * redacted before the cut, escaped as JSON and then as the log escapes what JSON leaves raw: bidi
 * overrides, C1 controls, line separators): MCP's stdio is one message a line, and a server
 * printing its answers over several lines, or a BOM before them, never answers `initialize`,
 * and one that exits may have written why there (console.log). Redacted here: an exit's words
 * reach the warning as they are made.
 */
function strayText(cfg: McpServerConfig, stray: ChildTransport["stray"]): string {
  if (stray.lines === 0) return "";
  const secrets = configSecrets(cfg.env, commandLineOf(cfg));
  const whole = withoutSecrets(stray.first, secrets);
  // Kept STRAY_KEPT long: a long secret quoted early may run past that, matching no whole value.
  const first = cutText(stray.cut ? withoutCutEnd(whole, secrets, STRAY_SHOWN) : whole, STRAY_SHOWN);
  return `; ${stray.lines} of the lines on its stdout were no JSON-RPC message (one a line), the first ${terminalText(JSON.stringify(first))}`;
}

class ExitedAtStart extends Error {}

/** Killed by the core (a flood, a line over the limit), or exited: the SDK's error says only "Connection closed". */
function failure(
  err: unknown,
  exit: ChildExit | null,
  { cfg, tail, transport }: { cfg: McpServerConfig; tail: StderrTail; transport: ChildTransport },
): unknown {
  if (transport.stoppedFor) return new Error(`it was stopped: ${transport.stoppedFor}`);
  // Its stderr's end, and what it wrote on stdout that was no message (console.log's reason).
  const said = `${quoted(tail.lines())}${strayText(cfg, transport.stray)}`;
  if (exit) return new ExitedAtStart(`it ${exitText(exit)}${said}`);
  return err;
}

/** How long a failed start waits to see whether the server exited (and its stderr's end) before killing it. */
const EXIT_SEEN_MS = 500;

/** The server's exit, with its stderr read to the end; null when it still runs after EXIT_SEEN_MS. */
function exitOf(child: McpChild, stderrRead: Promise<void>): Promise<ChildExit | null> {
  const exited = child.exited.then(async (exit) => {
    await stderrRead;
    return exit;
  });
  return within(exited, EXIT_SEEN_MS, null);
}

function quoted(lines: string[]): string {
  return lines.length === 0
    ? " (it wrote nothing to stderr)"
    : `; the end of its stderr: ${lines.join(" | ")}`;
}

/** Longest part of a failed start's error a warning quotes. */
const MAX_ERROR_CHARS = 400;

/**
 * Why a start failed, as the `tools_unavailable` warning of every chat for RETRY_AFTER_MS (pool.ts)
 * quotes it: the server's own error message can be megabytes and hold lone surrogates, and quote
 * the key it was given (a client library's "request to <url> failed"): its config's secrets are
 * redacted as in its stderr's end, before the cut, so none is left in part. Its bidi overrides
 * and C1 controls are escaped as the stray line's are (a host showing it would render them),
 * within the cut: escapes counted, so it stays MAX_ERROR_CHARS.
 */
function shown(err: unknown, cfg: McpServerConfig): string {
  const said = withoutSecrets(
    String((err as Error)?.message ?? err),
    configSecrets(cfg.env, commandLineOf(cfg)),
  );
  return terminalTextCut(cutText(said, MAX_ERROR_CHARS).toWellFormed(), MAX_ERROR_CHARS);
}

/**
 * Stops a server that failed to start. It has nothing worth a graceful exit, and one that
 * hangs may ignore stdin's end and SIGTERM, so it is killed outright (guarded: its whole
 * group) before the client lets go of it; the chat does not wait for it, the pool's close()
 * does.
 */
function stopFailed(name: string, child: McpChild, client: Client): Promise<void> {
  child.kill();
  logger.info(`MCP server '${name}' (pid ${child.pid}) killed after a failed start`);
  return Promise.all([child.exited, client.close().catch(() => {})]).then(() => {});
}

/**
 * Logs what a server writes to stderr; reading it also keeps the pipe from filling up. Reading
 * is the core's work on its main loop, as stdout's notifications are: held to the same budget
 * (unasked-budget.ts), each chunk charged, a server that writes more is killed (`kill`) and read
 * no more, so that one writing without end does not take a CPU for as long as it runs.
 */
async function logStderr(
  stream: ReadableStream<Uint8Array>,
  tail: StderrTail,
  debug: StderrDebugLog,
  budget: UnaskedBudget,
  kill: (why: string) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  try {
    for await (const chunk of stream) {
      if (!budget.take(chunk.length)) return kill(overspentWhy(budget.limits));
      const text = decoder.decode(chunk, { stream: true });
      tail.add(text);
      debug.add(text);
    }
  } catch {
    // A broken pipe ends the log, nothing else.
  } finally {
    debug.end();
  }
}
