import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeFakeModel } from "../../test/fixtures/llama-stand-in/binary.ts";
import type { Turn } from "../../test/fixtures/llama-stand-in/script.ts";
import type { HostPlan } from "../../test/windows/observations.ts";
import { windowsPath } from "./toolchain.ts";

/**
 * The folder the Windows suite runs in, written the way a Windows user's files look: a
 * config.yaml with CRLF line ends and backslash paths with a drive letter, a data folder
 * named with a space and a non-ASCII letter, the tiny GGUF, the stand-in's script; and the
 * host's plan, every path in it as Windows sees it.
 */

export const DATA_FOLDER = "data folder ë";

/** What the stand-in answers, in order; every core that starts it reads it from the top. */
export const SCRIPT: Turn[] = [
  { tool_calls: [{ name: "t__echo", arguments: { text: "ping from Windows" } }] },
  { content: "Windows says hi" },
  // The session's cancelled chat: slow enough to be cancelled after its first chunk.
  { content: Array.from({ length: 60 }, (_, i) => `word${i}`).join(" "), chunk_delay_ms: 150 },
];

export function configYaml(files: { llama: string; mcp: string; model: string; stack: string }): string {
  const w = windowsPath;
  const lines = [
    "app:",
    `  data_dir: .\\${DATA_FOLDER}`,
    "llama:",
    `  binary: ${w(files.llama)}`,
    "  parallel: 1",
    "model:",
    `  path: ${w(files.model)}`,
    "  context: 2048",
    "agents:",
    "  - name: assistant",
    "    system_prompt: You are a test assistant.",
    "    tools: [t.*]",
    "mcp_servers:",
    "  - name: t",
    // Named as `npx` would be: a .cmd shim found through PATH and PATHEXT, which Windows cannot
    // spawn as it stands (the core runs it through cmd.exe, src/platform/windows-command.ts).
    "    command: mcp-shim",
    "    env:",
    `      PATH: ${w(join(files.stack, "bin"))};C:\\windows\\system32;C:\\windows`,
    `      MCP_TEST_LOG: ${w(join(files.stack, "mcp-calls.jsonl"))}`,
    `      MCP_TEST_PIDS: ${w(join(files.stack, "mcp-pids.txt"))}`,
    "memory:",
    "  enabled: true",
    "",
  ];
  return lines.join("\r\n");
}

/** Writes the stack under `root` and the stand-in's knobs beside its exe; returns the host's plan file. */
export function writeWindowsStack(root: string, exes: { core: string; llama: string; mcp: string }) {
  const stack = join(root, "stack");
  const empty = join(root, "empty");
  mkdirSync(stack, { recursive: true });
  mkdirSync(empty, { recursive: true });
  const model = writeFakeModel(stack);
  const script = join(stack, "script.json");
  writeFileSync(script, JSON.stringify(SCRIPT));
  const yaml = configYaml({ llama: exes.llama, mcp: exes.mcp, model, stack });
  writeFileSync(join(stack, "config.yaml"), yaml);
  // A second model beside the first, with a data folder of its own (the several scenario).
  const two = yaml
    .replace(`data_dir: .\\${DATA_FOLDER}`, `data_dir: .\\${DATA_FOLDER} two`)
    .replace(
      "memory:",
      `models:\r\n  - name: second\r\n    path: ${windowsPath(model)}\r\n    context: 1024\r\nmemory:`,
    );
  writeFileSync(join(stack, "config-two.yaml"), two);
  // The MCP server as a hung or careless one is: it outlives stdin's end, so only a Job Object
  // ends it (cmd.exe's child, which libuv's job lets leave) when the core is killed.
  const stubborn = yaml.replace("    env:\r\n", "    env:\r\n      MCP_TEST_MODE: stubborn\r\n");
  writeFileSync(join(stack, "config-stubborn.yaml"), stubborn);
  mkdirSync(join(stack, "bin"), { recursive: true });
  writeFileSync(join(stack, "bin", "mcp-shim.cmd"), `@"${windowsPath(exes.mcp)}" %*\r\n`);
  const knobs = {
    FAKE_LLAMA_SCRIPT: windowsPath(script),
    FAKE_LLAMA_REQUEST_LOG: windowsPath(join(stack, "llama-requests.jsonl")),
    FAKE_LLAMA_LOAD_MS: "30",
  };
  writeFileSync(exes.llama.replace(/\.exe$/, ".knobs.json"), JSON.stringify(knobs));
  const plan: HostPlan = {
    core: windowsPath(exes.core),
    config: windowsPath(join(stack, "config.yaml")),
    configTwo: windowsPath(join(stack, "config-two.yaml")),
    configStubborn: windowsPath(join(stack, "config-stubborn.yaml")),
    stackDir: windowsPath(stack),
    dataDir: windowsPath(join(stack, DATA_FOLDER)),
    emptyDir: windowsPath(empty),
    mcpPids: windowsPath(join(stack, "mcp-pids.txt")),
  };
  const planFile = join(root, "plan.json");
  writeFileSync(planFile, JSON.stringify(plan, null, 2));
  return { planFile, plan, stack, dataDir: join(stack, DATA_FOLDER), model };
}
