import { describe, expect, test } from "bun:test";
import { configYaml, SCRIPT } from "../../scripts/windows/stack.ts";
import { windowsPath } from "../../scripts/windows/toolchain.ts";
import { judge, KNOWN, type LinuxFacts, report } from "../../scripts/windows/verdicts.ts";
import { fileTimeTicks, type Observation, type ScenarioError } from "../windows/observations.ts";

// The Windows suite's Linux half, without Wine: the verdicts over hand-made observations (a run
// where everything holds, then one thing broken at a time) and the Windows-style stack it writes.

const EXE = "Z:\\suite\\bin\\local-ai.exe";
const t = (ms: number) => fileTimeTicks(ms).toString();
const now = 1_780_000_000_000;
const facts: LinuxFacts = {
  sessions: ["default_user/abcd1234"],
  leftoverProcesses: [],
  version: "0.1.0",
  modelPath: "Z:\\suite\\stack\\model.gguf",
};
const result = (id: unknown, r: unknown) => ({ id, type: "result", result: r });
const error = (id: unknown, code: string) => ({ id, type: "error", code, message: code });
const ev = (id: unknown, event: string) => ({ id, type: "event", event });
const run = (stdout: unknown, code = 0) => ({
  code,
  stdout: typeof stdout === "string" ? stdout : JSON.stringify(stdout),
  stderrTail: "",
  ms: 300,
});

function healthy(): Observation[] {
  const llama = { state: "ready", pid: 464, rss_bytes: 9_000_000 };
  return [
    {
      scenario: "probe",
      pid: 32,
      residentBytes: 115_000_000,
      runtimeRss: 116_000_000,
      identity: {
        start_time: t(now - 900),
        cmdline: "Z:\\suite\\bin\\host.exe",
        exe: "Z:\\suite\\bin\\host.exe",
      },
      hostStartedTicks: t(now),
      execPath: "Z:\\suite\\bin\\host.exe",
      cores: { cores: 2, logical: 2 },
      logicalFromOs: 2,
      memory: { total_bytes: 25e9, available_bytes: 24e9 },
      osTotalBytes: 25e9,
      aliveSelf: true,
      child: {
        identity: { start_time: t(now + 5), cmdline: EXE, exe: EXE },
        spawnedBetween: [t(now - 1000), t(now + 1000)],
        residentBytes: 90_000_000,
        aliveWhileRunning: true,
        aliveAfterExit: false,
      },
      noSuchPid: false,
      job: { joined: true, probe: 0 },
    },
    {
      scenario: "conformance",
      messages: [
        result(1, { protocol_version: 1 }),
        result(2, { status: "ok" }),
        error(null, "invalid_json"),
        error(4, "unknown_method"),
        result("crlf", { status: "ok" }),
        error("dup", "invalid_request"),
        result(5, { cancelled: true }),
        error("dup", "cancelled"),
        result(6, { status: "ok" }),
      ],
      exitCode: 0,
      nonJsonLines: [],
    },
    {
      scenario: "cli",
      version: run("0.1.0\n"),
      doctor: run({
        ok: true,
        checks: [
          { id: "hardware", status: "ok", message: "CPU 2 cores/2 threads" },
          { id: "data_dir", status: "ok", message: "Z:\\suite\\stack\\data folder ë does not exist yet" },
        ],
      }),
      plan: run({
        fits: true,
        model: { path: facts.modelPath },
        hardware: { cpu: { physical: 2 } },
        plan: { threads: 2 },
      }),
    },
    {
      scenario: "session",
      initialize: result("init", { protocol_version: 1 }),
      chat: {
        terminal: result("chat", { response: "Windows says hi" }),
        events: ["run_start", "llm_start", "tool_start", "tool_done", "llm_chunk", "final"].map((e) =>
          ev("chat", e),
        ),
        ms: 2000,
      },
      status: result("status", { llama, core: { pid: 40, rss_bytes: 80_000_000 } }),
      cancel: {
        answer: result("cancel", { cancelled: true }),
        chat: { terminal: error("slow", "cancelled"), events: [], ms: 40 },
        afterCancelMs: 40,
      },
      statusAfterCancel: result("status2", { llama }),
      structured: { terminal: result("json", { json: { os: "x", letters: 0 } }), events: [], ms: 100 },
      document: { terminal: result("doc", { format: "markdown", chunks: 1 }), events: [], ms: 100 },
      documents: result("docs", { documents: [{ name: "notes.md" }] }),
      pdf: { terminal: result("pdf", { format: "pdf", chunks: 2 }), events: [], ms: 100 },
      shutdown: { terminal: result("bye", { status: "ok" }), resultMs: 300, exitMs: 350, exitCode: 0 },
      llamaPid: 464,
      llamaAliveAfterExit: false,
      mcpCalls: ['{"tool":"echo","args":{"text":"ping from Windows"},"pid":484}'],
      stderrTail: "",
    },
    {
      scenario: "eof",
      warmup: { terminal: result("warm", { status: "ready" }), events: [], ms: 1000 },
      llamaPid: 600,
      exitMs: 400,
      exitCode: 0,
      llamaAliveAfterExit: false,
      stderrTail: "",
    },
    {
      scenario: "terminate",
      chat: { terminal: result("chat", { response: "Windows says hi" }), events: [], ms: 2000 },
      llamaPid: 700,
      mcpPids: [736],
      llamaGoneMs: 0,
      mcpGoneMs: 0,
      waitedMs: 160,
      tasklist: [],
      stderrTail: "",
    },
    {
      scenario: "several",
      chats: ["default", "second"].map((model) => ({
        terminal: result(model, { response: "Windows says hi", model }),
        events: [],
        ms: 1500,
      })),
      llamaPids: [900, 901],
      goneMs: 0,
      tasklist: [],
      stderrTail: "",
    },
    { scenario: "reap", leftover: 808, staged: true, goneMs: 244, waitedMs: 245, stderrTail: "" },
    {
      scenario: "paths",
      dir: "C:\\stack",
      folders: ["c:\\stack"],
      pipeConfig: refused("config_invalid", { key: "model.path" }, "model.path names a device or pipe"),
      nulConfig: refused("config_invalid", { key: "model.path" }, "model.path names the Windows device NUL"),
      document: refused("invalid_request", { field: "path" }, "path names a device or pipe"),
      exported: refused("invalid_request", { field: "path" }, "path names a device or pipe"),
      exitCodes: [0, 0, 0, 0],
    },
  ];
}

/** An error line as the protocol writes it: code, message and data at its top. */
function refused(code: string, data: Record<string, string>, message: string) {
  return { id: 1, type: "error", code, message, data };
}

function verdict(lines: (Observation | ScenarioError)[], strict = false, f = facts) {
  return report(judge(lines, f), strict);
}

function failed(lines: (Observation | ScenarioError)[], f = facts): string[] {
  return judge(lines, f)
    .filter((c) => !c.ok)
    .map((c) => c.id);
}

/** The healthy run with one scenario's observation changed. */
function with_<S extends Observation["scenario"]>(
  scenario: S,
  change: (o: Extract<Observation, { scenario: S }>) => void,
): Observation[] {
  const lines = healthy();
  change(lines.find((l) => l.scenario === scenario) as Extract<Observation, { scenario: S }>);
  return lines;
}

describe("the Windows suite's verdicts", () => {
  test("paths: two folders listed, a refusal for a missing file, a core left running each fail their check", () => {
    const lines = with_("paths", (o) => {
      o.folders = ["C:\\stack", "c:/stack/"];
      o.document = refused("invalid_request", { field: "path" }, "path: no such file");
      o.exitCodes = [0, 0, null, 0];
    });
    expect(failed(lines)).toEqual(["paths.one_folder", "paths.pipe_document", "paths.exit"]);
  });

  test("a run where everything holds passes every check and exits 0, strict or not", () => {
    expect(failed(healthy())).toEqual([]);
    expect(verdict(healthy())).toMatchObject({ unexpected: 0, known: 0, exitCode: 0 });
    expect(verdict(healthy(), true).exitCode).toBe(0);
  });

  test("a known failure prints FAIL with its reason but passes the run; --strict fails it", () => {
    const slow = with_("session", (o) => {
      o.shutdown.exitMs = 8200;
    });
    const known = { "session.shutdown_fast": "the polite stop does not reach a Windows child" };
    const r = report(judge(slow, facts), false, known);
    expect(r).toMatchObject({ known: 1, unexpected: 0, exitCode: 0 });
    expect(r.lines.find((l) => l.includes("session.shutdown_fast"))).toStartWith("FAIL");
    expect(r.lines.find((l) => l.includes("session.shutdown_fast"))).toContain(
      known["session.shutdown_fast"],
    );
    expect(report(judge(slow, facts), true, known).exitCode).toBe(1);
    // Off the list (child mode's exit line fixed it), a slow stop is an unexpected failure.
    expect(KNOWN).toEqual({});
    expect(verdict(slow)).toMatchObject({ unexpected: 1, exitCode: 1 });
  });

  test("a known failure that passes is flagged for taking off the list", () => {
    const r = report(judge(healthy(), facts), false, { "session.shutdown_fast": "was slow" });
    expect(r.flip).toEqual(["session.shutdown_fast"]);
    expect(r.exitCode).toBe(0);
  });

  test("the issue's readings: rss_bytes null and unknown cores are unexpected failures now", () => {
    const noRss = with_("session", (o) => {
      o.status!.result.llama.rss_bytes = null;
    });
    expect(failed(noRss)).toEqual(["session.llama_rss"]);
    expect(verdict(noRss).exitCode).toBe(1);
    const noCores = with_("cli", (o) => {
      const doctor = JSON.parse(o.doctor.stdout);
      doctor.checks[0].message = "CPU ? cores/2 threads";
      o.doctor.stdout = JSON.stringify(doctor);
      o.plan.stdout = JSON.stringify({
        fits: true,
        model: { path: facts.modelPath },
        hardware: { cpu: { physical: null } },
        plan: { threads: 2 },
      });
    });
    expect(failed(noCores)).toEqual(["cli.doctor_cores", "cli.plan_threads"]);
  });

  test("protocol conformance: each broken answer fails its own check", () => {
    const noBadJson = with_("conformance", (o) => {
      o.messages = o.messages.filter((m) => m.code !== "invalid_json");
    });
    expect(failed(noBadJson)).toEqual(["conformance.bad_json"]);
    const dupAccepted = with_("conformance", (o) => {
      o.messages = o.messages.map((m) =>
        m.code === "invalid_request" ? result("dup", { slept_ms: 10 }) : m,
      );
    });
    expect(failed(dupAccepted)).toEqual(["conformance.duplicate_id"]);
    const stray = with_("conformance", (o) => {
      o.nonJsonLines = ["hello from console.log"];
    });
    expect(failed(stray)).toEqual(["conformance.exit"]);
  });

  test("what a killed core leaves: llama-server, an MCP server, a record the next core cannot reap", () => {
    const left = with_("terminate", (o) => {
      o.llamaGoneMs = null;
      o.mcpGoneMs = null;
    });
    expect(failed(left)).toEqual(["terminate.no_llama_server_left", "terminate.no_mcp_server_left"]);
    const unrecorded = with_("reap", (o) => {
      o.leftover = null;
    });
    expect(failed(unrecorded)).toEqual(["reap.within_10s"]);
    const slowReap = with_("reap", (o) => {
      o.goneMs = 12_000;
    });
    expect(failed(slowReap)).toEqual(["reap.within_10s"]);
  });

  test("Windows readings that disagree with the runtime's own fail the probe", () => {
    const wrongMemory = with_("probe", (o) => {
      o.residentBytes = 4096;
    });
    expect(failed(wrongMemory)).toEqual(["probe.resident"]);
    const lateChild = with_("probe", (o) => {
      o.child.identity!.start_time = t(now + 5000);
    });
    expect(failed(lateChild)).toEqual(["probe.child"]);
    const tooManyCores = with_("probe", (o) => {
      o.cores = { cores: 4, logical: 4 };
    });
    expect(failed(tooManyCores)).toEqual(["probe.cores"]);
  });

  test("a scenario that threw or never reported fails, and so does anything left running", () => {
    const lines: (Observation | ScenarioError)[] = healthy().filter((l) => l.scenario !== "eof");
    lines[1] = { scenario: "conformance", error: "Error: timed out" };
    const checks = judge(lines, { ...facts, leftoverProcesses: ["1234 Z:\\suite\\bin\\llama-server.exe"] });
    const failing = checks.filter((c) => !c.ok);
    expect(failing.map((c) => c.id)).toEqual(["conformance.ran", "eof.ran", "suite.nothing_left"]);
    expect(failing[0]!.seen).toContain("timed out");
    expect(report(checks).exitCode).toBe(1);
  });
});

describe("the Windows-style stack", () => {
  const files = {
    llama: "/w/bin/llama-server.exe",
    mcp: "/w/bin/mcp-test-server.exe",
    model: "/w/stack/model.gguf",
    stack: "/w/stack",
  };

  test("Linux paths become Z: paths; a relative one is refused", () => {
    expect(windowsPath("/tmp/a b/ë.txt")).toBe("Z:\\tmp\\a b\\ë.txt");
    expect(() => windowsPath("tmp/x")).toThrow("not an absolute path");
  });

  test("config.yaml has CRLF line ends only, backslash paths with a drive letter, a data folder with a space and ë", () => {
    const yaml = configYaml(files);
    expect(yaml.split("\r\n").length).toBeGreaterThan(10);
    expect(yaml.replaceAll("\r\n", "")).not.toContain("\n");
    expect(yaml).toContain("  binary: Z:\\w\\bin\\llama-server.exe\r\n");
    expect(yaml).toContain("  data_dir: .\\data folder ë\r\n");
    expect(yaml).toContain("MCP_TEST_PIDS: Z:\\w\\stack\\mcp-pids.txt\r\n");
  });

  test("the script: a tool call and its answer for each chat, then a reply slow enough to cancel", () => {
    expect(SCRIPT[0]?.tool_calls?.[0]?.name).toBe("t__echo");
    expect(SCRIPT[1]?.content).toBe("Windows says hi");
    expect((SCRIPT[2]?.chunk_delay_ms ?? 0) * 10).toBeGreaterThan(1000);
  });
});
