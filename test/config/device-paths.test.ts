import { describe, expect, test } from "bun:test";
import * as nodePath from "node:path";
import type { z } from "zod";
import { noDevicePaths } from "../../src/config/device-paths.ts";

// A config path naming a Windows pipe or device is config_invalid naming its key, before the
// loader's stat of model.path or a folder's walk opens it. Windows' rules are handed in.

function issues(config: unknown, rules = nodePath.win32): { path: (string | number)[]; message: string }[] {
  const found: { path: (string | number)[]; message: string }[] = [];
  const ctx = { addIssue: (i: { path: (string | number)[]; message: string }) => found.push(i) };
  noDevicePaths(config, ctx as unknown as z.RefinementCtx, rules);
  return found;
}

const hostile = {
  app: { data_dir: "\\\\.\\pipe\\data" },
  llama: { binary: "C:\\llama\\CON" },
  model: { path: "\\\\.\\pipe\\local-ai-model", mmproj: "C:\\m\\nul.gguf" },
  models: [{ name: "b", path: "\\\\server\\pipe\\m" }],
  mcp_servers: [{ name: "t", command: "\\\\.\\COM1", cwd: "C:\\aux" }],
  memory: { folders: ["C:\\notes", "//./pipe/notes"] },
};

describe("config paths naming a Windows device or pipe", () => {
  test("each is refused under its own key", () => {
    const found = issues(hostile);
    expect(found.map((i) => i.path.join("."))).toEqual([
      "app.data_dir",
      "llama.binary",
      "model.path",
      "model.mmproj",
      "models.0.path",
      "mcp_servers.0.command",
      "mcp_servers.0.cwd",
      "memory.folders.1",
    ]);
    expect(found[2]!.message).toContain("\\\\.\\pipe\\local-ai-model");
    expect(found[2]!.message).toContain("device or pipe");
  });

  test("plain paths, hf: references, auto, none and bare commands pass; and on Linux nothing is a device", () => {
    const fine = {
      app: { data_dir: "C:\\data" },
      llama: { binary: null },
      model: { path: "hf:org/m:q.gguf", mmproj: "auto" },
      models: [{ name: "b", path: "..\\m\\b.gguf", mmproj: "none" }],
      mcp_servers: [{ name: "t", command: "npx" }],
      memory: { folders: ["notes"] },
    };
    expect(issues(fine)).toEqual([]);
    expect(issues(hostile, nodePath.posix)).toEqual([]);
  });
});
