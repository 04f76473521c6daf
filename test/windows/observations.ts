/**
 * What the Windows suite's two halves say to each other: the plan the Linux side hands the
 * Windows-side host (Windows paths), and the observations the host prints back, one JSON line
 * per scenario. The host only observes; the Linux side (scripts/windows/verdicts.ts) judges.
 */

export interface HostPlan {
  /** local-ai.exe, the Windows build under test. */
  core: string;
  /** The stack's config.yaml (CRLF line ends, backslash paths, a data folder with a space and ë). */
  config: string;
  /** The stack's folder, the core's working directory. */
  stackDir: string;
  /** The config's data_dir, resolved. */
  dataDir: string;
  /** A folder without a config, for the protocol conformance. */
  emptyDir: string;
  /** The file the MCP test server appends its pid to. */
  mcpPids: string;
  /** The same stack with a second model (`models:`), its own data folder. */
  configTwo: string;
  /** The config with its MCP server stubborn: it outlives stdin's end (the terminate scenario). */
  configStubborn: string;
  /** Only these scenarios (all when absent). */
  only?: string[];
}

export type Msg = Record<string, any>;

/** Windows path spellings (path-scenarios.ts). */
export interface PathsObservation {
  scenario: "paths";
  /** The stack's folder as the host spelled it. */
  dir: string;
  /** `models`' folders, config's folder and model.path's spelled two ways (or its terminal, if none). */
  folders: unknown;
  /** `models` under a config whose model.path is a pipe's name, and one whose model.path is a device's. */
  pipeConfig: Msg | null;
  nulConfig: Msg | null;
  /** documents.add and sessions.export given the pipe's name. */
  document: Msg | null;
  exported: Msg | null;
  /** Each of the scenario's cores' exit codes after shutdown (null: it did not exit). */
  exitCodes: (number | null)[];
}

/** A command the host ran to its end. */
export interface CommandRun {
  code: number | null;
  stdout: string;
  stderrTail: string;
  ms: number;
}

/** A request and its terminal message, with the events it got. */
export interface Exchange {
  terminal: Msg | null;
  events: Msg[];
  ms: number;
}

export interface ProbeObservation {
  scenario: "probe";
  pid: number;
  residentBytes: number | null;
  runtimeRss: number;
  identity: { start_time: string; cmdline: string; exe?: string } | null;
  /** FILETIME ticks when the host started, from Date.now(). */
  hostStartedTicks: string;
  execPath: string;
  cores: { cores: number; logical: number } | null;
  logicalFromOs: number;
  memory: { total_bytes: number; available_bytes: number } | null;
  osTotalBytes: number;
  aliveSelf: boolean | null;
  child: {
    identity: { start_time: string; cmdline: string; exe?: string } | null;
    spawnedBetween: [string, string];
    residentBytes: number | null;
    aliveWhileRunning: boolean | null;
    aliveAfterExit: boolean | null;
  };
  noSuchPid: boolean | null;
  /** `local-ai.exe --version` run as a probe: whether it joined the core's Job Object, and its exit code. */
  job: { joined: boolean | null; probe: number | string };
}

export interface ConformanceObservation {
  scenario: "conformance";
  messages: Msg[];
  exitCode: number | null;
  nonJsonLines: string[];
}

export interface CliObservation {
  scenario: "cli";
  version: CommandRun;
  doctor: CommandRun;
  plan: CommandRun;
}

export interface SessionObservation {
  scenario: "session";
  initialize: Msg | null;
  chat: Exchange;
  status: Msg | null;
  cancel: { answer: Msg | null; chat: Exchange; afterCancelMs: number };
  statusAfterCancel: Msg | null;
  /** A chat with a response_format: its answer checked on the validator's worker thread. */
  structured: Exchange;
  /** documents.add of a Markdown text: its chunks written on the chunk worker thread. */
  document: Exchange;
  documents: Msg | null;
  /** documents.add of a PDF by path: pdf.js on the PDF thread (a fourth entry point of the exe). */
  pdf: Exchange;
  shutdown: { terminal: Msg | null; resultMs: number; exitMs: number; exitCode: number | null };
  llamaPid: number | null;
  llamaAliveAfterExit: boolean | null;
  mcpCalls: string[];
  stderrTail: string;
}

export interface EofObservation {
  scenario: "eof";
  warmup: Exchange;
  llamaPid: number | null;
  exitMs: number;
  exitCode: number | null;
  llamaAliveAfterExit: boolean | null;
  stderrTail: string;
}

export interface TerminateObservation {
  scenario: "terminate";
  chat: Exchange;
  llamaPid: number | null;
  mcpPids: number[];
  /** After TerminateProcess of the core: how long each child was seen alive (null: still alive at the end). */
  llamaGoneMs: number | null;
  mcpGoneMs: number | null;
  waitedMs: number;
  tasklist: string[];
  stderrTail: string;
}

export interface SeveralObservation {
  scenario: "several";
  /** A chat on each model, `default` and `second`. */
  chats: Exchange[];
  /** The llama-server of each model, from `status.models` before the kill. */
  llamaPids: (number | null)[];
  /** After TerminateProcess of the core: how long until both were gone (null: one still alive). */
  goneMs: number | null;
  tasklist: string[];
  stderrTail: string;
}

export interface ReapObservation {
  scenario: "reap";
  leftover: number | null;
  /** The leftover was started by the host from the killed core's record (nothing had outlived it). */
  staged: boolean;
  /** How long the next core took to stop the leftover (null: it did not within the wait). */
  goneMs: number | null;
  waitedMs: number;
  stderrTail: string;
}

export type Observation =
  | ProbeObservation
  | ConformanceObservation
  | CliObservation
  | SessionObservation
  | EofObservation
  | TerminateObservation
  | SeveralObservation
  | ReapObservation
  | PathsObservation;

export type ScenarioName = Observation["scenario"];

/** A scenario that threw before it could observe. */
export interface ScenarioError {
  scenario: ScenarioName;
  error: string;
}

export const SCENARIOS: readonly ScenarioName[] = [
  "probe",
  "conformance",
  "cli",
  "session",
  "eof",
  "terminate",
  "several",
  "reap",
  "paths",
];

/** Milliseconds since 1970 → FILETIME ticks (100 ns since 1601), as Windows counts creation times. */
export function fileTimeTicks(ms: number): bigint {
  return (BigInt(Math.round(ms)) + 11_644_473_600_000n) * 10_000n;
}
