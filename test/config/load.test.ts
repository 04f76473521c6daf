import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig, parseConfigText } from "../../src/config/load.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("config", () => {
  test("an empty file is a complete config with the documented defaults", () => {
    const { config, warnings } = parseConfigText("", "/app/config.yaml");
    expect(warnings).toEqual([]);
    expect(config.app).toEqual({
      data_dir: "/app/data",
      max_parse_errors: 2,
      max_steps: 8,
      max_parallel_chats: "auto",
      max_images: 8,
      max_image_pixels: 50_000_000,
      stream_gather_ms: 5,
    });
    expect(config.llama.startup_timeout_s).toBe(120);
    expect(config.llama.binary).toBeNull();
    expect(config.model).toMatchObject({
      path: "/app/models/model.gguf",
      context: "auto",
      gpu_layers: "auto",
    });
    expect(config.agents[0]!.name).toBe("assistant");
    expect(config.memory).toMatchObject({ enabled: true, top_k: 4 });
    expect(config.stdio).toMatchObject({ queue_size: 1024, drain_timeout_ms: 2000 });
  });

  test("relative paths resolve against the config's folder, not the working directory", () => {
    const text = [
      "app: { data_dir: ./state }",
      "llama: { binary: bin/llama-server }",
      "model: { path: ../models/m.gguf }",
      "mcp_servers:",
      "  - { name: files, command: ./mcp-files, cwd: work }",
      "  - { name: npx, command: npx }",
      "memory: { folders: [notes] }",
    ].join("\n");
    const { config } = parseConfigText(text, "/home/u/app/config.yaml");
    expect(config.app.data_dir).toBe("/home/u/app/state");
    expect(config.llama.binary).toBe("/home/u/app/bin/llama-server");
    expect(config.model.path).toBe("/home/u/models/m.gguf");
    expect(config.mcp_servers[0]).toMatchObject({
      command: "/home/u/app/mcp-files",
      cwd: "/home/u/app/work",
    });
    expect(config.mcp_servers[1]!.command).toBe("npx"); // bare names are looked up on PATH
    expect(config.memory.folders).toEqual(["/home/u/app/notes"]);
  });

  test("a value written where a block scalar's header goes is not quoted in the syntax error", () => {
    // The parser's message quotes the header's line whole: `key: |value`, maybe a token.
    const err = coreErrorOf(() =>
      parseConfigText("llama:\n  extra_args: |sk-SECRET-VALUE\n    x\n", "/c/config.yaml"),
    );
    expect(err.code).toBe("config_invalid");
    expect(err.message).toBe(
      "/c/config.yaml:2: YAML syntax error: Block scalar header includes extra characters",
    );
    expect(JSON.stringify(err.data)).not.toContain("SECRET");
  });

  test("a YAML syntax error names the file and the line", () => {
    const err = coreErrorOf(() =>
      parseConfigText("app:\n  max_steps: 3\nmodel: [\n  x: 1\n", "/c/config.yaml"),
    );
    expect(err.code).toBe("config_invalid");
    expect(err.message).toStartWith("/c/config.yaml:");
    expect(err.data).toMatchObject({ file: "/c/config.yaml" });
    expect(typeof err.data!.line).toBe("number");
    expect(err.message).not.toContain("\n");
  });

  test("a schema error names the key path, the line and what was expected", () => {
    const err = coreErrorOf(() =>
      parseConfigText("app:\n  data_dir: ./d\n  max_steps: lots\n", "/c/config.yaml"),
    );
    expect(err).toMatchObject({
      code: "config_invalid",
      data: { key: "app.max_steps", line: 3, file: "/c/config.yaml" },
    });
    expect(err.message).toBe('/c/config.yaml:3: app.max_steps: expected number, got string "lots"');
    const e2 = coreErrorOf(() => parseConfigText("model:\n  context: huge\n", "/c/config.yaml"));
    expect(e2.message).toContain('model.context: expected "auto" or a number');
    const e3 = coreErrorOf(() => parseConfigText("agents:\n  - name: a\n  - name: a\n", "/c/config.yaml"));
    expect(e3.data!.key).toBe("agents");
    expect(e3.message).toContain("unique");
    // A window past 100 ms would hold a model's text back visibly (docs/protocol.md#joined-pieces).
    const e4 = coreErrorOf(() => parseConfigText("app:\n  stream_gather_ms: 250\n", "/c/config.yaml"));
    expect(e4.data).toMatchObject({ key: "app.stream_gather_ms", line: 2 });
    expect(parseConfigText("app:\n  stream_gather_ms: 0\n", "/c/c.yaml").config.app.stream_gather_ms).toBe(0);
  });

  test("unknown keys are warnings with their line, not errors", () => {
    const { warnings } = parseConfigText(
      "app:\n  max_step: 3\nllama:\n  bogus: 1\ntypo_section: {}\n",
      "/c/x.yaml",
    );
    expect(warnings).toEqual([
      "/c/x.yaml:2: unknown key 'app.max_step' is ignored",
      "/c/x.yaml:4: unknown key 'llama.bogus' is ignored",
      "/c/x.yaml:5: unknown key 'typo_section' is ignored",
    ]);
  });

  test("a file that is not a mapping is config_invalid", () => {
    expect(coreErrorOf(() => parseConfigText("- a\n- b\n", "/c/x.yaml")).code).toBe("config_invalid");
    expect(coreErrorOf(() => parseConfigText("just a string", "/c/x.yaml")).code).toBe("config_invalid");
  });

  test("no file is config_missing; a directory is config_invalid", () => {
    using dir = tmpdir();
    expect(coreErrorOf(() => loadConfig("config.yaml", dir.path)).code).toBe("config_missing");
    mkdirSync(join(dir.path, "d.yaml"));
    expect(coreErrorOf(() => loadConfig("d.yaml", dir.path)).code).toBe("config_invalid");
    writeFileSync(join(dir.path, "ok.yaml"), "app: { max_steps: 3 }\n");
    expect(loadConfig("ok.yaml", dir.path).config.app.max_steps).toBe(3);
  });

  test("config.example.yaml is valid, warning-free, and documents every schema key", async () => {
    const path = join(import.meta.dir, "../../config.example.yaml");
    const text = await Bun.file(path).text();
    const { warnings } = parseConfigText(text, path);
    expect(warnings).toEqual([]);
    const sections = Object.keys(ConfigSchema.parse({}));
    for (const section of sections) expect(text).toMatch(new RegExp(`^${section}:`, "m"));
    const keysOf = (o: Record<string, unknown>) => Object.keys(o);
    const defaults = ConfigSchema.parse({}) as Record<string, any>;
    for (const section of ["app", "llama", "model", "hardware", "memory", "logging", "stdio"]) {
      for (const key of keysOf(defaults[section]))
        expect(text).toMatch(new RegExp(`^\\s+#?\\s*${key}:`, "m"));
    }
  });
});
