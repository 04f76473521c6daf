import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, sep } from "node:path";
import { loadConfig, parseConfigText } from "../../src/config/load.ts";
import { hubCacheDir, tokenFile } from "../../src/models/hf-cache.ts";
import { expandHome } from "../../src/util/home-path.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// What Windows editors and shells write (docs/bootstrap.md "The config file"): PowerShell 5.1's
// `>` and Notepad's "Unicode" save UTF-16 with a byte-order mark; an old editor, Latin-1.
const TEXT = "app:\n  max_steps: 3\nmodel:\n  path: José.gguf\n";

function utf16(text: string, order: "le" | "be"): Buffer {
  const le = Buffer.from(text, "utf16le");
  if (order === "be") le.swap16();
  return Buffer.concat([Buffer.from(order === "le" ? [0xff, 0xfe] : [0xfe, 0xff]), le]);
}

describe("the config file's encoding", () => {
  for (const [name, bytes] of [
    ["UTF-16 LE with its mark", utf16(TEXT, "le")],
    ["UTF-16 BE with its mark", utf16(TEXT, "be")],
    ["UTF-8 with a mark", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(TEXT)])],
  ] as const) {
    test(`${name} is read as its text`, () => {
      using dir = tmpdir();
      writeFileSync(join(dir.path, "config.yaml"), bytes);
      const { config } = loadConfig(join(dir.path, "config.yaml"));
      expect(config.app.max_steps).toBe(3);
      expect(config.model.path).toBe(join(dir.path, "José.gguf"));
    });
  }

  test("bytes that are not UTF-8 are refused naming their line, not made U+FFFD", () => {
    using dir = tmpdir();
    const file = join(dir.path, "config.yaml");
    writeFileSync(file, Buffer.from(TEXT, "latin1"));
    const err = coreErrorOf(() => loadConfig(file));
    expect(err.code).toBe("config_invalid");
    expect(err.message).toContain("is not UTF-8 text");
    expect(err.message).toContain("save it as UTF-8");
    expect(err.data).toMatchObject({ file, line: 4 });
  });
});

describe("~ in paths", () => {
  test("a leading ~/ is the home folder; ~user and a ~ further in are left as they are", () => {
    expect(expandHome("~", "/home/u")).toBe("/home/u");
    expect(expandHome("~/m/a.gguf", "/home/u")).toBe("/home/u/m/a.gguf");
    expect(expandHome("~bob/a", "/home/u")).toBe("~bob/a");
    expect(expandHome("a/~/b", "/home/u")).toBe("a/~/b");
    // On POSIX a backslash is part of a file name (Python's posixpath.expanduser leaves it too).
    if (sep === "/") expect(expandHome("~\\x", "/home/u")).toBe("~\\x");
  });

  test("the config's paths: ~/ is the home folder, not a folder named ~ beside the config", () => {
    const text = [
      "app: { data_dir: ~/state }",
      "llama: { binary: ~/bin/llama-server }",
      "model: { path: ~/models/m.gguf, mmproj: ~/models/p.gguf }",
      "memory: { folders: [~/notes] }",
      "mcp_servers: [{ name: s, command: ~/bin/srv, cwd: ~/work }]",
    ].join("\n");
    const { config } = parseConfigText(text, "/c/config.yaml");
    const home = homedir();
    expect(config.app.data_dir).toBe(join(home, "state"));
    expect(config.llama.binary).toBe(join(home, "bin/llama-server"));
    expect(config.model.path).toBe(join(home, "models/m.gguf"));
    expect(config.model.mmproj).toBe(join(home, "models/p.gguf"));
    expect(config.memory.folders).toEqual([join(home, "notes")]);
    expect(config.mcp_servers[0]).toMatchObject({ command: join(home, "bin/srv"), cwd: join(home, "work") });
  });

  test("HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and HF_TOKEN_PATH with ~, as huggingface_hub reads them", () => {
    expect(hubCacheDir({ HF_HUB_CACHE: "~/hub" }, "/home/u")).toBe("/home/u/hub");
    expect(hubCacheDir({ HF_HOME: "~/hf" }, "/home/u")).toBe("/home/u/hf/hub");
    expect(hubCacheDir({ XDG_CACHE_HOME: "~/c" }, "/home/u")).toBe("/home/u/c/huggingface/hub");
    expect(tokenFile({ HF_TOKEN_PATH: "~/t" }, "/home/u")).toBe("/home/u/t");
  });
});
