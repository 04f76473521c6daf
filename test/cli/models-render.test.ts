import { describe, expect, test } from "bun:test";
import { renderModels } from "../../src/cli/models.ts";
import type { ModelEntry } from "../../src/protocol/models.ts";

// `local-ai models` shows the name the config gives each GGUF (docs/models.md "Several models").
const entry = (path: string, name: string | null): ModelEntry => ({
  path,
  files: [path],
  source: "folder",
  repo: null,
  commit: null,
  refs: [],
  file: path.split("/").pop()!,
  model_path: path,
  configured: name === "default",
  name,
  loaded: false,
  size_bytes: 1000,
  quantization: "Q4_K_M",
  architecture: "llama",
  parameters: null,
  fits: true,
  context_per_slot: 2048,
  vision: false,
  verdict: "fits",
  problem: null,
});

describe("the models listing on the CLI", () => {
  test("each GGUF's configured name is printed beside it; an unnamed one gets none", () => {
    const text = renderModels(
      {
        models: [entry("/m/main.gguf", "default"), entry("/m/q.gguf", "qwen3-8b"), entry("/m/x.gguf", null)],
        cache_dir: "/cache",
        folders: ["/m"],
      },
      false,
    );
    const lines = text.split("\n");
    expect(lines.find((l) => l.includes("/m/main.gguf") && !l.includes("model.path"))).toContain(
      "(configured as default)",
    );
    expect(lines.find((l) => l.includes("/m/q.gguf") && !l.includes("model.path"))).toContain(
      "(configured as qwen3-8b)",
    );
    expect(lines.find((l) => l.includes("/m/x.gguf") && !l.includes("model.path"))).not.toContain(
      "configured as",
    );
  });

  test("a GGUF's own text never drives the terminal: its architecture and file name are shown escaped", () => {
    const hostile = { ...entry("/m/e\u001b]0;x\u0007.gguf", null), architecture: "\u001b[2Jllama" };
    const text = renderModels({ models: [hostile], cache_dir: "/cache", folders: ["/m"] }, true);
    expect(text.replaceAll(/\u001b\[[0-9;]*m/g, "")).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(text).toContain("/m/e\\u{1b}]0;x\\u{7}.gguf");
  });

  test("what was left out is one line each, its path escaped, with or without models", () => {
    const left_out = [
      { path: "/nas/e\u001b]0;x\u0007", reason: "no_answer" as const },
      { path: "/cache/models--a--b", reason: "deadline" as const },
      { path: "/locked", reason: "unreadable" as const },
    ];
    for (const models of [[], [entry("/m/x.gguf", null)]]) {
      const text = renderModels({ models, cache_dir: "/cache", folders: ["/m"], left_out }, true);
      const plain = text.replaceAll(/\u001b\[[0-9;]*m/g, "");
      expect(plain).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
      const lines = plain.split("\n").filter((l) => l.startsWith("! not listed"));
      expect(lines).toEqual([
        "! not listed: /nas/e\\u{1b}]0;x\\u{7}: its drive did not answer in time (a network drive offline?)",
        "! not listed: /cache/models--a--b: the hub cache ran out of time before it was listed whole",
        "! not listed: /locked: it could not be read (permissions?)",
      ]);
    }
    expect(renderModels({ models: [], cache_dir: "/cache", folders: ["/m"] }, false)).not.toContain(
      "not listed",
    );
  });
});
