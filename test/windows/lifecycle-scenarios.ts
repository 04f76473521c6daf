import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { windowsProcessIdentity } from "../../src/platform/windows/process.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { minimalPdf } from "../fixtures/pdf-writer.ts";
import { type Core, exchange, goneWithin, llamaPidOf, runCommand, seenAlive } from "./host-tools.ts";
import type {
  EofObservation,
  HostPlan,
  ReapObservation,
  SessionObservation,
  SeveralObservation,
  TerminateObservation,
} from "./observations.ts";

/**
 * The core with the llama-server stand-in and the MCP test server, as a Windows host runs it:
 * a chat with a tool call, status, a cancelled chat, shutdown, stdin's end, TerminateProcess,
 * and the next core reaping what a killed one left.
 */

/** A schema with a pattern, so the answer's check runs a regex on RE2. */
const STRUCTURED = {
  type: "json_schema",
  schema: {
    type: "object",
    properties: { os: { type: "string", pattern: "^[a-z]+$" }, letters: { type: "integer" } },
    required: ["os", "letters"],
  },
};

function startCore(plan: HostPlan): Core {
  return spawnCore({ binary: plan.core, cwd: plan.stackDir, args: ["--config", plan.config] });
}

function mcpPids(plan: HostPlan): number[] {
  if (!existsSync(plan.mcpPids)) return [];
  return readFileSync(plan.mcpPids, "utf8").split(/\r?\n/).filter(Boolean).map(Number);
}

function mcpCalls(plan: HostPlan): string[] {
  const file = join(plan.stackDir, "mcp-calls.jsonl");
  return existsSync(file) ? readFileSync(file, "utf8").split(/\r?\n/).filter(Boolean) : [];
}

export async function session(plan: HostPlan): Promise<SessionObservation> {
  await using core = startCore(plan);
  const initialize = (await exchange(core, { id: "init", method: "initialize" })).terminal;
  const chat = await exchange(
    core,
    { id: "chat", method: "chat", params: { input: "Hello from Windows, ë" } },
    90_000,
  );
  const status = (await exchange(core, { id: "status", method: "status" })).terminal;
  // The script's third turn streams slowly: cancelled after its first chunk.
  core.send({ id: "slow", method: "chat", params: { input: "Count slowly" } });
  await core.waitFor(
    (ms) => ms.some((m) => m.id === "slow" && (m.event === "llm_chunk" || m.type !== "event")),
    30_000,
  );
  const t0 = performance.now();
  const answer = (await exchange(core, { id: "cancel", method: "cancel", params: { request_id: "slow" } }))
    .terminal;
  await core.waitFor((ms) => ms.some((m) => m.id === "slow" && m.type !== "event"), 30_000);
  const afterCancelMs = Math.round(performance.now() - t0);
  const slow = {
    terminal: core.terminal("slow") ?? null,
    events: core.messages.filter((m) => m.id === "slow" && m.type === "event"),
    ms: afterCancelMs,
  };
  const statusAfterCancel = (await exchange(core, { id: "status2", method: "status" })).terminal;
  // The worker thread of the compiled exe (a second entry point) and RE2 under Windows.
  const structured = await exchange(
    core,
    { id: "json", method: "chat", params: { input: "As JSON", response_format: STRUCTURED } },
    60_000,
  );
  // The chunk thread of the compiled exe (a third entry point): a document stored and listed.
  const document = await exchange(
    core,
    {
      id: "doc",
      method: "documents.add",
      params: { text: "# Windows notes\n\nThe kettle is in the left cupboard.", name: "notes.md" },
    },
    60_000,
  );
  const documents = (await exchange(core, { id: "docs", method: "documents.list" })).terminal;
  // The PDF thread of the compiled exe (a fourth entry point): pdf.js reads a file by its path.
  const guide = join(plan.stackDir, "guide.pdf");
  writeFileSync(guide, minimalPdf([["A WOMBAT guide"], ["page two"]]));
  const pdf = await exchange(core, { id: "pdf", method: "documents.add", params: { path: guide } }, 60_000);
  const llamaPid = llamaPidOf(status);
  const s0 = performance.now();
  const bye = await exchange(core, { id: "bye", method: "shutdown" }, 30_000);
  const exitCode = await core.exited(30_000).catch(() => null);
  return {
    scenario: "session",
    initialize,
    chat,
    status,
    cancel: { answer, chat: slow, afterCancelMs },
    statusAfterCancel,
    structured,
    document,
    documents,
    pdf,
    shutdown: {
      terminal: bye.terminal,
      resultMs: bye.ms,
      exitMs: Math.round(performance.now() - s0),
      exitCode,
    },
    llamaPid,
    llamaAliveAfterExit: llamaPid === null ? null : seenAlive(llamaPid),
    mcpCalls: mcpCalls(plan),
    stderrTail: core.stderr.slice(-3000),
  };
}

export async function eof(plan: HostPlan): Promise<EofObservation> {
  await using core = startCore(plan);
  await exchange(core, { id: "init", method: "initialize" });
  const warmup = await exchange(core, { id: "warm", method: "warmup" }, 90_000);
  const llamaPid = llamaPidOf((await exchange(core, { id: "status", method: "status" })).terminal);
  const t0 = performance.now();
  core.closeStdin();
  const exitCode = await core.exited(30_000).catch(() => null);
  return {
    scenario: "eof",
    warmup,
    llamaPid,
    exitMs: Math.round(performance.now() - t0),
    exitCode,
    llamaAliveAfterExit: llamaPid === null ? null : seenAlive(llamaPid),
    stderrTail: core.stderr.slice(-3000),
  };
}

/** How long the children may take to notice their core is gone before they count as left. */
const LEFT_AFTER_MS = 5000;

export async function terminate(plan: HostPlan): Promise<TerminateObservation> {
  const before = new Set(mcpPids(plan));
  // Its MCP server outlives stdin's end: the core's death must end it all the same.
  await using core = spawnCore({
    binary: plan.core,
    cwd: plan.stackDir,
    args: ["--config", plan.configStubborn],
  });
  await exchange(core, { id: "init", method: "initialize" });
  const chat = await exchange(
    core,
    { id: "chat", method: "chat", params: { input: "before the kill" } },
    90_000,
  );
  const llamaPid = llamaPidOf((await exchange(core, { id: "status", method: "status" })).terminal);
  const mcp = mcpPids(plan).filter((p) => !before.has(p));
  core.proc.kill(); // Bun on Windows: TerminateProcess, as a crash or Task Manager's End task
  await core.proc.exited;
  const t0 = performance.now();
  const [llamaGoneMs, mcpGoneMs] = await Promise.all([
    goneWithin(llamaPid === null ? [] : [llamaPid], LEFT_AFTER_MS),
    goneWithin(mcp, LEFT_AFTER_MS),
  ]);
  const listing = await runCommand(["tasklist"], plan.stackDir, 15_000).catch(() => null);
  return {
    scenario: "terminate",
    chat,
    llamaPid,
    mcpPids: mcp,
    llamaGoneMs,
    mcpGoneMs,
    waitedMs: Math.round(performance.now() - t0),
    tasklist: (listing?.stdout ?? "").split(/\r?\n/).filter((l) => /llama-server|mcp-test-server/i.test(l)),
    stderrTail: core.stderr.slice(-3000),
  };
}

/**
 * Two models loaded (docs/models.md, "Several models"): a chat on each, so two llama-server.exe
 * run, then TerminateProcess of the core; neither may outlive it (docs/supervisor.md). Its own
 * config and data folder, so the reap scenario after it finds only its own core's record.
 */
export async function several(plan: HostPlan): Promise<SeveralObservation> {
  await using core = spawnCore({ binary: plan.core, cwd: plan.stackDir, args: ["--config", plan.configTwo] });
  await exchange(core, { id: "init", method: "initialize" });
  const chats: SeveralObservation["chats"] = [];
  for (const model of ["default", "second"])
    chats.push(
      await exchange(core, { id: model, method: "chat", params: { input: "two models", model } }, 90_000),
    );
  const status = (await exchange(core, { id: "status", method: "status" })).terminal;
  const rows = (status?.result?.models ?? []) as { name: string; pid: number | null }[];
  const llamaPids = ["default", "second"].map((n) => rows.find((r) => r.name === n)?.pid ?? null);
  core.proc.kill(); // TerminateProcess, as in the terminate scenario
  await core.proc.exited;
  const pids = llamaPids.filter((p): p is number => typeof p === "number");
  const goneMs = await goneWithin(pids, LEFT_AFTER_MS);
  const listing = await runCommand(["tasklist"], plan.stackDir, 15_000).catch(() => null);
  return {
    scenario: "several",
    chats,
    llamaPids,
    goneMs,
    tasklist: (listing?.stdout ?? "").split(/\r?\n/).filter((l) => /llama-server/i.test(l)),
    stderrTail: core.stderr.slice(-3000),
  };
}

/** docs/supervisor.md: the next serve-stdio with the same data directory stops a leftover within 10 s. */
const REAP_WAIT_MS = 15_000;

/**
 * The record the killed core left under the data directory, and a live process it names: the
 * recorded llama-server itself when it outlived its core, else one started here with the
 * recorded program and arguments, the record pointed at it (pid and creation time), as a
 * leftover would be where nothing ended it. Null when there is no record to work from.
 */
function leftoverFromRecord(plan: HostPlan): { pid: number; staged: boolean } | null {
  const run = join(plan.dataDir, "run");
  const name = existsSync(run)
    ? readdirSync(run).find((f) => /^llama-server-\d+(\.[0-9a-f]+)?\.json$/.test(f))
    : undefined;
  if (!name) return null;
  const file = join(run, name);
  const record = JSON.parse(readFileSync(file, "utf8"));
  if (seenAlive(record.owner.pid)) return null; // not a dead core's
  if (seenAlive(record.pid)) return { pid: record.pid, staged: false };
  const orphan = Bun.spawn([record.binary, ...record.argv], {
    stdin: "ignore",
    stdout: "ignore",
    stderr: "ignore",
    windowsHide: true,
  });
  const identity = windowsProcessIdentity(orphan.pid);
  if (!identity) throw new Error(`no identity for the staged leftover (pid ${orphan.pid})`);
  writeFileSync(
    file,
    JSON.stringify({ ...record, pid: orphan.pid, start_time: identity.start_time }, null, 2),
  );
  return { pid: orphan.pid, staged: true };
}

export async function reap(plan: HostPlan): Promise<ReapObservation> {
  const leftover = leftoverFromRecord(plan);
  if (!leftover)
    return { scenario: "reap", leftover: null, staged: false, goneMs: null, waitedMs: 0, stderrTail: "" };
  await Bun.sleep(500); // the staged one up and listening, as a real leftover would be
  const t0 = performance.now();
  await using core = startCore(plan);
  await exchange(core, { id: "init", method: "initialize" });
  const waitFrom = performance.now();
  const gone = await goneWithin([leftover.pid], REAP_WAIT_MS);
  const waitedMs = Math.round(performance.now() - t0);
  await exchange(core, { id: "bye", method: "shutdown" });
  await core.exited(30_000).catch(() => null);
  if (seenAlive(leftover.pid)) process.kill(leftover.pid); // the suite leaves nothing behind either way
  return {
    scenario: "reap",
    leftover: leftover.pid,
    staged: leftover.staged,
    goneMs: gone === null ? null : Math.round(waitFrom - t0 + gone),
    waitedMs,
    stderrTail: core.stderr.slice(-3000),
  };
}
