import type {
  CliObservation,
  ConformanceObservation,
  EofObservation,
  Msg,
  ProbeObservation,
  ReapObservation,
  SessionObservation,
  SeveralObservation,
  TerminateObservation,
} from "../../test/windows/observations.ts";

/**
 * The Windows suite's checks, one function per scenario: pure, from what the Windows-side host
 * observed (and what the Linux side saw of the files and processes) to named checks, each one
 * able to fail. verdicts.ts runs them over a whole run and prints the verdict.
 */

export interface Check {
  id: string;
  what: string;
  ok: boolean;
  /** What was seen, when it is worth saying. */
  seen?: string;
}

export interface LinuxFacts {
  /** Session folders under the data folder (the one named with a space and ë) after the run. */
  sessions: string[];
  /** Wine processes of the run still running once the host had exited. */
  leftoverProcesses: string[];
  /** The version the core must print. */
  version: string;
  /** The model path as the config gives it (Windows form). */
  modelPath: string;
}

export const check = (id: string, what: string, ok: boolean, seen?: unknown): Check => ({
  id,
  what,
  ok,
  ...(seen === undefined ? {} : { seen: typeof seen === "string" ? seen : JSON.stringify(seen) }),
});
const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const ticks = (s: string | undefined | null) => (s && /^\d+$/.test(s) ? BigInt(s) : null);
const SECOND = 10_000_000n; // FILETIME ticks

function terminals(messages: Msg[], id: unknown): Msg[] {
  return messages.filter((m) => m.id === id && m.type !== "event");
}

export function judgeProbe(o: ProbeObservation): Check[] {
  const started = ticks(o.hostStartedTicks)!;
  const created = ticks(o.identity?.start_time);
  const [lo, hi] = o.child.spawnedBetween.map((s) => BigInt(s)) as [bigint, bigint];
  const childCreated = ticks(o.child.identity?.start_time);
  const sameSize =
    isNum(o.residentBytes) && o.residentBytes > o.runtimeRss / 2 && o.residentBytes < o.runtimeRss * 2;
  return [
    check(
      "probe.resident",
      "the host's working set (K32GetProcessMemoryInfo) matches Bun's own rss",
      sameSize,
      {
        residentBytes: o.residentBytes,
        runtimeRss: o.runtimeRss,
      },
    ),
    check(
      "probe.identity",
      "the host's creation time (GetProcessTimes) precedes its start, and its image path is its exe",
      created !== null &&
        created <= started + SECOND &&
        created > started - 120n * SECOND &&
        o.identity?.exe?.toLowerCase() === o.execPath.toLowerCase(),
      { identity: o.identity, hostStartedTicks: o.hostStartedTicks, execPath: o.execPath },
    ),
    check(
      "probe.child",
      "a spawned core: created while spawned, its exe named, memory read, alive, then dead after its exit",
      childCreated !== null &&
        childCreated >= lo &&
        childCreated <= hi &&
        /local-ai\.exe$/i.test(o.child.identity?.exe ?? "") &&
        isNum(o.child.residentBytes) &&
        o.child.residentBytes > 1024 * 1024 &&
        o.child.aliveWhileRunning === true &&
        o.child.aliveAfterExit === false,
      o.child,
    ),
    check(
      "probe.job",
      "a probe (local-ai.exe --version) joins the core's kill-on-close Job Object and answers",
      o.job.joined === true && o.job.probe === 0,
      o.job,
    ),
    check(
      "probe.cores",
      "physical cores (GetLogicalProcessorInformationEx): at least one, at most the logical processors",
      !!o.cores &&
        o.cores.cores >= 1 &&
        o.cores.cores <= o.logicalFromOs &&
        o.cores.logical <= o.logicalFromOs,
      { cores: o.cores, logicalFromOs: o.logicalFromOs },
    ),
    check(
      "probe.memory",
      "physical memory (GlobalMemoryStatusEx) agrees with os.totalmem()",
      !!o.memory &&
        o.memory.available_bytes <= o.memory.total_bytes &&
        Math.abs(o.memory.total_bytes - o.osTotalBytes) <= o.osTotalBytes * 0.05,
      { memory: o.memory, osTotalBytes: o.osTotalBytes },
    ),
    check(
      "probe.alive",
      "the host is alive; an unused pid is not",
      o.aliveSelf === true && o.noSuchPid === false,
      {
        aliveSelf: o.aliveSelf,
        noSuchPid: o.noSuchPid,
      },
    ),
  ];
}

export function judgeConformance(o: ConformanceObservation): Check[] {
  const m = o.messages;
  const one = (id: unknown) => terminals(m, id)[0];
  const dup = terminals(m, "dup").map((t) => t.code ?? t.type);
  return [
    check(
      "conformance.initialize",
      "initialize answers protocol version 1",
      one(1)?.result?.protocol_version === 1,
      one(1),
    ),
    check("conformance.ping", "ping answers ok", one(2)?.result?.status === "ok", one(2)),
    check(
      "conformance.bad_json",
      "a line that is not JSON gets invalid_json with id null",
      m.some((x) => x.id === null && x.code === "invalid_json"),
      m.filter((x) => x.id === null),
    ),
    check(
      "conformance.unknown_method",
      "an unknown method gets unknown_method",
      one(4)?.code === "unknown_method",
      one(4),
    ),
    check(
      "conformance.crlf",
      "a request ending in CRLF is answered",
      one("crlf")?.result?.status === "ok",
      one("crlf"),
    ),
    check(
      "conformance.duplicate_id",
      "a second request with an id in flight gets invalid_request; the first is cancelled later",
      dup[0] === "invalid_request" && dup[1] === "cancelled" && dup.length === 2,
      dup,
    ),
    check(
      "conformance.exit",
      "shutdown exits 0 and stdout carried protocol lines only",
      o.exitCode === 0 && o.nonJsonLines.length === 0,
      { exitCode: o.exitCode, nonJsonLines: o.nonJsonLines },
    ),
  ];
}

function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export function judgeCli(o: CliObservation, facts: LinuxFacts): Check[] {
  const doctor = parseJson(o.doctor.stdout);
  const plan = parseJson(o.plan.stdout);
  const hardware = doctor?.checks?.find((c: Msg) => c.id === "hardware");
  const dataDir = doctor?.checks?.find((c: Msg) => c.id === "data_dir");
  const physical = plan?.hardware?.cpu?.physical;
  return [
    check(
      "cli.version",
      "--version prints the version",
      o.version.code === 0 && o.version.stdout.trim() === facts.version,
      o.version,
    ),
    check("cli.doctor", "doctor --json: exit 0, every check ok", o.doctor.code === 0 && doctor?.ok === true, {
      code: o.doctor.code,
      failed: doctor?.checks?.filter((c: Msg) => c.status !== "ok" && c.status !== "skip"),
      stderr: o.doctor.stderrTail,
    }),
    check(
      "cli.doctor_cores",
      "doctor knows the physical cores",
      typeof hardware?.message === "string" && !hardware.message.includes("? cores"),
      hardware?.message,
    ),
    check(
      "cli.doctor_data_dir",
      "doctor names the data folder with its space and ë, under the config's folder",
      typeof dataDir?.message === "string" && dataDir.message.includes("\\data folder ë"),
      dataDir?.message,
    ),
    check("cli.plan", "plan --json: exit 0, the model fits", o.plan.code === 0 && plan?.fits === true, {
      code: o.plan.code,
      stderr: o.plan.stderrTail,
    }),
    check(
      "cli.plan_threads",
      "the plan's threads are one per physical core",
      isNum(physical) && plan?.plan?.threads === physical,
      { physical, threads: plan?.plan?.threads },
    ),
    check(
      "cli.plan_model_path",
      "the model's backslash path with its drive letter comes through as written",
      plan?.model?.path === facts.modelPath,
      plan?.model?.path,
    ),
  ];
}

export function judgeSession(o: SessionObservation, facts: LinuxFacts): Check[] {
  const names = o.chat.events.map((e) => e.event);
  const llama = o.status?.result?.llama;
  return [
    check(
      "session.initialize",
      "initialize with the stack's config",
      o.initialize?.result?.protocol_version === 1,
    ),
    check(
      "session.chat",
      "a chat through the stand-in and the tiny GGUF: a tool call, then the answer, with its events",
      o.chat.terminal?.result?.response === "Windows says hi" &&
        names[0] === "run_start" &&
        names.includes("tool_start") &&
        names.includes("tool_done") &&
        names.at(-1) === "final",
      { terminal: o.chat.terminal, events: names },
    ),
    check(
      "session.structured",
      "a structured chat: the answer checked against its schema (a pattern on RE2) on the worker thread of the exe",
      // The stand-in answers a json_schema request with JSON of the schema's shape (its own values).
      /^[a-z]+$/.test(String(o.structured.terminal?.result?.json?.os)) &&
        Number.isInteger(o.structured.terminal?.result?.json?.letters),
      { terminal: o.structured.terminal },
    ),
    check(
      "session.document",
      "documents.add of a Markdown text: its chunks stored by the chunk worker thread of the exe, then listed",
      o.document.terminal?.result?.format === "markdown" &&
        Number(o.document.terminal?.result?.chunks) >= 1 &&
        (o.documents?.result?.documents as { name?: string }[] | undefined)?.[0]?.name === "notes.md",
      { terminal: o.document.terminal, documents: o.documents },
    ),
    check(
      "session.pdf",
      "documents.add of a PDF by its path: pdf.js on the PDF thread of the exe, a chunk a page",
      o.pdf.terminal?.result?.format === "pdf" && Number(o.pdf.terminal?.result?.chunks) === 2,
      { terminal: o.pdf.terminal },
    ),
    check(
      "session.mcp_tool",
      "the MCP test server (a Windows exe) ran the tool",
      o.mcpCalls.some((c) => parseJson(c)?.tool === "echo"),
      o.mcpCalls,
    ),
    check(
      "session.status",
      "status: llama-server ready, with a pid",
      llama?.state === "ready" && isNum(llama?.pid),
      llama,
    ),
    check(
      "session.llama_rss",
      "status: llama-server's rss_bytes is a number",
      isNum(llama?.rss_bytes) && llama.rss_bytes > 0,
      llama?.rss_bytes,
    ),
    check(
      "session.core_rss",
      "status: the core's rss_bytes is a number",
      isNum(o.status?.result?.core?.rss_bytes),
      o.status?.result?.core,
    ),
    check(
      "session.cancel",
      "cancel mid-stream: cancelled: true, the chat ends cancelled within 2 s",
      o.cancel.answer?.result?.cancelled === true &&
        o.cancel.chat.terminal?.code === "cancelled" &&
        o.cancel.afterCancelMs < 2000,
      { answer: o.cancel.answer, terminal: o.cancel.chat.terminal, afterCancelMs: o.cancel.afterCancelMs },
    ),
    check(
      "session.data_dir",
      "sessions are written under the data folder named with a space and ë",
      facts.sessions.length > 0,
      facts.sessions,
    ),
    check(
      "session.shutdown",
      "shutdown answers and the core exits 0",
      o.shutdown.terminal?.type === "result" && o.shutdown.exitCode === 0,
      o.shutdown,
    ),
    ...stopChecks("session.shutdown_fast", "shutdown", o.shutdown.exitMs, o.llamaPid, o.llamaAliveAfterExit),
  ];
}

/** How a stop went, the same for shutdown and stdin's end: quick, and no llama-server after it. */
function stopChecks(fastId: string, how: string, exitMs: number, pid: number | null, alive: boolean | null) {
  const scenario = fastId.split(".")[0];
  return [
    check(fastId, `${how}: the core is gone within 1 s`, exitMs <= 1000, `${exitMs} ms`),
    check(`${scenario}.no_llama_server_after`, "no llama-server.exe after the core exits", alive === false, {
      pid,
      alive,
    }),
  ];
}

export function judgeEof(o: EofObservation): Check[] {
  return [
    check(
      "eof.warmup",
      "warmup starts llama-server",
      o.warmup.terminal?.result?.status === "ready",
      o.warmup.terminal,
    ),
    check("eof.exit", "stdin's end: the core exits 0", o.exitCode === 0, {
      exitCode: o.exitCode,
      stderr: o.stderrTail.slice(-500),
    }),
    ...stopChecks("eof.exit_fast", "stdin's end", o.exitMs, o.llamaPid, o.llamaAliveAfterExit),
  ];
}

export function judgeTerminate(o: TerminateObservation): Check[] {
  return [
    check(
      "terminate.chat",
      "a chat before the kill (llama-server and the MCP server running)",
      o.chat.terminal?.type === "result" && isNum(o.llamaPid) && o.mcpPids.length > 0,
      {
        terminal: o.chat.terminal,
        llamaPid: o.llamaPid,
        mcpPids: o.mcpPids,
      },
    ),
    check(
      "terminate.no_llama_server_left",
      "TerminateProcess of the core: llama-server.exe gone within 5 s",
      o.llamaGoneMs !== null,
      { llamaPid: o.llamaPid, goneMs: o.llamaGoneMs, tasklist: o.tasklist },
    ),
    check(
      "terminate.no_mcp_server_left",
      "TerminateProcess of the core: the MCP server (cmd.exe's child, outliving stdin's end) gone within 5 s",
      o.mcpPids.length > 0 && o.mcpGoneMs !== null,
      { mcpPids: o.mcpPids, goneMs: o.mcpGoneMs },
    ),
  ];
}

export function judgeSeveral(o: SeveralObservation): Check[] {
  const pids = o.llamaPids.filter(isNum);
  return [
    check(
      "several.two_models",
      "a chat on each of two models: each result names its model, two llama-server.exe run",
      o.chats.length === 2 &&
        o.chats.every((c, i) => c.terminal?.result?.model === ["default", "second"][i]) &&
        pids.length === 2 &&
        pids[0] !== pids[1],
      { chats: o.chats.map((c) => c.terminal), llamaPids: o.llamaPids },
    ),
    check(
      "several.none_left",
      "TerminateProcess of the core with two models loaded: both llama-server.exe gone within 5 s",
      pids.length === 2 && o.goneMs !== null,
      { llamaPids: o.llamaPids, goneMs: o.goneMs, tasklist: o.tasklist },
    ),
  ];
}

export function judgeReap(o: ReapObservation): Check[] {
  const what = "the next core stops a killed core's recorded llama-server.exe within 10 s";
  // A core records its llama-server for exactly this (docs/supervisor.md): no record is a failure
  // too.
  if (o.leftover === null)
    return [check("reap.within_10s", what, false, "the killed core left no llama-server record")];
  return [
    check(
      "reap.within_10s",
      `${what}${o.staged ? " (a leftover staged from the record)" : ""}`,
      o.goneMs !== null && o.goneMs <= 10_000,
      {
        leftover: o.leftover,
        goneMs: o.goneMs,
        stderr: o.stderrTail.slice(-800),
      },
    ),
  ];
}
