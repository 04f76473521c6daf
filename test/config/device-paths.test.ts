import { describe, expect, test } from "bun:test";
import * as nodePath from "node:path";
import type { z } from "zod";
import { noDevicePaths } from "../../src/config/device-paths.ts";
import { loadConfig } from "../../src/config/load.ts";

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

describe("the config file's own path (--config) naming a Windows device or pipe", () => {
  const refusal = (path: string, rules = nodePath.win32) => {
    try {
      loadConfig(path, "/nowhere", rules);
      return undefined;
    } catch (err) {
      return err as { code?: string; message?: string; data?: unknown };
    }
  };

  test("is config_invalid naming it, before anything stats or reads it (a pipe's server connected to, CON read forever)", () => {
    const pipe = refusal("\\\\.\\pipe\\local-ai-config");
    expect(pipe?.code).toBe("config_invalid");
    expect(pipe?.message).toContain("\\\\.\\pipe\\local-ai-config");
    expect(pipe?.message).toContain("device or pipe");
    expect(pipe?.data).toEqual({ file: "\\\\.\\pipe\\local-ai-config", line: null, key: null });
    expect(refusal("CON")?.message).toContain("Windows device CON");
    expect(refusal("C:\\app\\nul.yaml")?.code).toBe("config_invalid");
    expect(refusal("\\\\server\\pipe\\cfg")?.message).toContain("named pipe");
  });

  test("on Linux and macOS they are ordinary names: a file that is not there is config_missing", () => {
    expect(refusal("CON", nodePath.posix)?.code).toBe("config_missing");
  });
});
