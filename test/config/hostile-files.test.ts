import { describe, expect, test } from "bun:test";
import { symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONFIG_MAX_BYTES } from "../../src/config/config-file.ts";
import { loadConfig, parseConfigText } from "../../src/config/load.ts";
import { type DoctorDeps, runDoctor } from "../../src/doctor/doctor.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { CoreServices } from "../../src/server/services.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * What tells a refusal before the work from the work itself (never ending, or tens of seconds),
 * not a speed: one parse of the file took up to 3 s beside a loaded suite on a 2-core machine.
 */
const BOUNDED_MS = 10_000;

const LOAD_TS = join(import.meta.dir, "../../src/config/load.ts");

/**
 * Loads `file` in a child process, so a loader that blocks (a FIFO) or reads without end
 * (/dev/zero) fails the test after a few seconds instead of hanging or exhausting this one.
 */
async function loadInChild(file: string): Promise<{ code?: string; message?: string; data?: unknown }> {
  const script = `
    const { loadConfig } = await import(${JSON.stringify(LOAD_TS)});
    try { loadConfig(${JSON.stringify(file)}); console.log(JSON.stringify({ code: "loaded" })); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, data: e.data })); }
  `;
  const child = Bun.spawn([process.execPath, "-e", script], {
    stdout: "pipe",
    stderr: "pipe",
    timeout: 5000,
    env: { ...process.env, BUN_JSC_forceRAMSize: String(512 * 1024 * 1024) },
  });
  const out = await new Response(child.stdout).text();
  await child.exited;
  if (child.signalCode) return { code: `killed by ${child.signalCode}` };
  return JSON.parse(out);
}

/** doctor on the config.yaml in `dir`, on a machine without a GPU or llama-server. */
function doctorIn(dir: string) {
  const deps: DoctorDeps = {
    readModel: defaultPlanDeps.readModel,
    probe: async () => cpuOnlyMachine(),
    run: async () => ({ kind: "absent" }),
  };
  return runDoctor(new CoreServices({ configPath: "config.yaml", cwd: dir }), deps);
}

// Nine-fold nesting, seven levels: 9^7 ≈ 4.8 million scalars once expanded.
const ALIAS_BOMB = [
  'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
  "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]",
  "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]",
  "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]",
  "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]",
  "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]",
  "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]",
  "",
].join("\n");

describe("YAML that fails while converting (issue 10 item 11)", () => {
  test("an alias with no anchor is config_invalid with its line", () => {
    const err = coreErrorOf(() => parseConfigText("logging:\n  level: warn\napp: *nope\n", "/c/config.yaml"));
    expect(err.code).toBe("config_invalid");
    expect(err.data).toMatchObject({ file: "/c/config.yaml", line: 3 });
    expect(err.message).toStartWith("/c/config.yaml:3: ");
    expect(err.message).toContain("*nope");
    expect(err.message).not.toContain("\n");
  });

  // `system_prompt: *concise* answers` is Markdown to the writer, an alias to YAML.
  test("an alias with no anchor says a value that begins with * goes in quotes", () => {
    const text = "agents:\n  - name: a\n    system_prompt: *concise*\n";
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 3 } });
    expect(err.message).toContain("*concise*");
    expect(err.message).toContain("in quotes");
  });

  // YAML reads a password that begins with `*` as an alias: the refusal quoted it, in the
  // message every request answers, in doctor's report and the host's logs. One that begins with
  // `&` is an anchor's name and the rest the value: `&Xq9sEcret rest` reached the server as
  // `rest` without a word (alone, as null: "expected string, got null", no hint).
  test.each([
    [
      "an MCP server's env",
      "mcp_servers:\n  - name: gh\n    command: npx\n    env:\n      PASSWORD: *Xq9sEcret\n",
      5,
    ],
    [
      "an MCP server's args",
      "mcp_servers:\n  - name: gh\n    command: npx\n    args: [--password, *Xq9sEcret]\n",
      4,
    ],
    ["llama.extra_args", "llama:\n  extra_args:\n    - --api-key\n    - *Xq9sEcret\n", 4],
    [
      "an MCP server's env (&)",
      "mcp_servers:\n  - name: gh\n    command: npx\n    env:\n      PASSWORD: &Xq9sEcret rest\n",
      5,
    ],
    ["llama.extra_args (&)", "llama:\n  extra_args: [--api-key, &Xq9sEcret]\n", 2],
    [
      "a models entry's extra_args (&)",
      "models:\n  - name: m\n    path: m.gguf\n    extra_args: [-hft, &Xq9sEcret x]\n",
      4,
    ],
  ])("a value that begins with * or & in %s is refused by its line and key, not quoted", (_, text, line) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({
      code: "config_invalid",
      data: { line, key: expect.stringMatching(/\.(PASSWORD|1)$/) },
    });
    expect(err.message).toContain("quote");
    expect(JSON.stringify({ m: err.message, d: err.data })).not.toContain("Xq9sEcret");
  });

  test("a value that begins with & is refused though another anchor of its name is used", () => {
    // An alias names the latest anchor of its name before it: a password `&shared x9…` in env and a
    // later `&shared` the config uses counted as used by name, and reached the server as `x9…`.
    const text =
      "mcp_servers:\n  - name: gh\n    command: npx\n    env:\n      PASSWORD: &shared Xq9sEcret\n" +
      "    args: [&shared --verbose, *shared]\n";
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({
      code: "config_invalid",
      data: { line: 5, key: "mcp_servers.0.env.PASSWORD" },
    });
    expect(JSON.stringify({ m: err.message, d: err.data })).not.toContain("Xq9sEcret");
  });

  test("an anchor an alias uses, or outside env, args and extra_args, still loads", () => {
    const text =
      "agents:\n  - name: a\n    model: &m default\nmcp_servers:\n  - name: s\n    command: c\n    env: {A: &tok t1, B: *tok}\n";
    const { config } = parseConfigText(text, "/c/config.yaml");
    expect(config.mcp_servers[0]?.env).toEqual({ A: "t1", B: "t1" });
    expect(config.agents[0]?.model).toBe("default");
  });

  test("an alias bomb is config_invalid with a line, quickly", () => {
    const t0 = performance.now();
    const err = coreErrorOf(() => parseConfigText(ALIAS_BOMB, "/c/config.yaml"));
    // Expanded, the bomb never ends: the bound tells that from a parse, not a speed.
    expect(performance.now() - t0).toBeLessThan(BOUNDED_MS);
    expect(err.code).toBe("config_invalid");
    expect(err.data).toMatchObject({ file: "/c/config.yaml" });
    expect(typeof err.data!.line).toBe("number");
    expect(err.message).toContain("alias");
    expect(err.message).not.toContain("\n");
  });

  test("anchors by the ten thousand are config_invalid with a line, quickly; a thousand still load", () => {
    const config = (anchors: number, aliases: number) =>
      `x: [${Array.from({ length: anchors }, (_, i) => `&${i.toString(36)} 1`).join(",")}]\n` +
      `y: [${Array.from({ length: aliases }, () => "*0").join(",")}]\n`;
    // The library walked every anchor before an alias to resolve it (6 s for 10,000 aliases on an
    // earlier VM, on the event loop); refused at the 1,001st anchor, it is one parse (0.5-3 s).
    const t0 = performance.now();
    const err = coreErrorOf(() => parseConfigText(config(90_000, 9_990), "/c/config.yaml"));
    expect(performance.now() - t0).toBeLessThan(BOUNDED_MS);
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 1, key: null } });
    expect(err.message).toBe("/c/config.yaml:1: more than 1000 anchors (&rs); a config needs a few");
    expect(parseConfigText(config(1000, 9000), "/c/config.yaml").warnings).toHaveLength(2);
  });

  test("an alias that refers to its own node is config_invalid", () => {
    const err = coreErrorOf(() => parseConfigText("app: &a { x: *a }\n", "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 1 } });
  });

  test("modest alias use still works", () => {
    const text = "x-args: &args [--foo, --bar]\nllama:\n  extra_args: *args\n";
    const { config, warnings } = parseConfigText(text, "/c/config.yaml");
    expect(config.llama.extra_args).toEqual(["--foo", "--bar"]);
    expect(warnings).toEqual(["/c/config.yaml:1: unknown key 'x-args' is ignored"]);
  });

  test("a merge key is config_invalid naming its line, not dropped as an unknown key", () => {
    // YAML 1.2 reads `<<` as an ordinary key: ignored, the core would start on the defaults
    // the author meant to replace (docs/bootstrap.md).
    const text = "x-llama: &base\n  ctx_size: 4096\nllama:\n  binary: /opt/llama-server\n  <<: *base\n";
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 5, key: "llama.<<" } });
    expect(err.message).toBe(
      "/c/config.yaml:5: llama.<<: YAML merge keys are not supported; write the keys out",
    );
    const list = "mcp_servers:\n  - <<: {name: a}\n    command: x\n";
    expect(coreErrorOf(() => parseConfigText(list, "/c/config.yaml")).data).toMatchObject({
      line: 2,
      key: "mcp_servers.0.<<",
    });
    // In a map of free names (an MCP server's env) the merged mapping was refused as a value
    // ("expected string, got a mapping"), which never named the merge key as what went wrong.
    const env = "x-env: &e {A: '1'}\nmcp_servers:\n  - name: a\n    command: x\n    env:\n      <<: *e\n";
    const envErr = coreErrorOf(() => parseConfigText(env, "/c/config.yaml"));
    expect(envErr).toMatchObject({ code: "config_invalid", data: { line: 6, key: "mcp_servers.0.env.<<" } });
    expect(envErr.message).toContain("YAML merge keys are not supported");
    // Inside a section the core does not read, it is that section's warning as before.
    expect(parseConfigText("x-base: {<<: {a: 1}}\n", "/c/config.yaml").warnings).toEqual([
      "/c/config.yaml:1: unknown key 'x-base' is ignored",
    ]);
  });

  test("doctor reports the bomb as a failed config check and still runs the others", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), ALIAS_BOMB);
    const report = await doctorIn(dir.path);
    const config = report.checks.find((c) => c.id === "config")!;
    expect(config.status).toBe("fail");
    expect(config.data).toMatchObject({ code: "config_invalid", file: join(dir.path, "config.yaml") });
    expect(report.checks.length).toBeGreaterThan(4);
  });
});

describe("config files that are not regular files (issue 10 item 12)", () => {
  test("a FIFO is config_invalid at once, without blocking", async () => {
    using dir = tmpdir();
    const fifo = join(dir.path, "config.yaml");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const r = await loadInChild(fifo);
    expect(r.code).toBe("config_invalid");
    expect(r.message).toContain(fifo);
    expect(r.message).toContain("not a regular file");
    expect(r.data).toMatchObject({ file: fifo, line: null, key: null });
  });

  test("/dev/zero is config_invalid at once, without reading it", async () => {
    const r = await loadInChild("/dev/zero");
    expect(r.code).toBe("config_invalid");
    expect(r.message).toContain("/dev/zero");
    expect(r.message).toContain("not a regular file");
  });

  test("YAML nested deeper than the parser can follow is config_invalid saying so", () => {
    const text = `a: ${"[".repeat(20_000)}1${"]".repeat(20_000)}\n`;
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 1 } });
    expect(err.message).toContain("nested too deeply to read");
  });

  test("a loop of symbolic links is config_invalid saying so; a link to nothing is config_missing", () => {
    using dir = tmpdir();
    const a = join(dir.path, "a.yaml");
    symlinkSync(join(dir.path, "b.yaml"), a);
    symlinkSync(a, join(dir.path, "b.yaml"));
    const loop = coreErrorOf(() => loadConfig(a));
    expect(loop).toMatchObject({ code: "config_invalid", data: { file: a } });
    expect(loop.message).toContain("a loop of symbolic links");
    const dangling = join(dir.path, "c.yaml");
    symlinkSync(join(dir.path, "nothing.yaml"), dangling);
    expect(coreErrorOf(() => loadConfig(dangling)).code).toBe("config_missing");
  });

  test("a regular file over the size cap is config_invalid naming the size and the cap", () => {
    using dir = tmpdir();
    const big = join(dir.path, "config.yaml");
    writeFileSync(big, `# ${"x".repeat(CONFIG_MAX_BYTES)}\n`);
    const err = coreErrorOf(() => loadConfig(big));
    expect(err.code).toBe("config_invalid");
    expect(err.message).toContain(big);
    expect(err.message).toContain(String(CONFIG_MAX_BYTES));
    expect(err.data).toMatchObject({ file: big, line: null, key: null });
  });

  test("a file just under the cap still loads", () => {
    using dir = tmpdir();
    const file = join(dir.path, "config.yaml");
    const head = "app: { max_steps: 5 }\n# ";
    writeFileSync(file, `${head}${"x".repeat(CONFIG_MAX_BYTES - head.length - 1)}\n`);
    expect(loadConfig(file).config.app.max_steps).toBe(5);
  });
});

describe("keys named like Object's own members", () => {
  test("`toString`, `constructor`, `__proto__` at any level are unknown keys, never a crash", () => {
    const text =
      "toString: 1\n__proto__: { polluted: 1 }\nllama:\n  constructor: 2\nmodel:\n  hasOwnProperty: 3\n";
    const { warnings } = parseConfigText(text, "/c/config.yaml");
    expect(warnings).toEqual([
      "/c/config.yaml:1: unknown key 'toString' is ignored",
      "/c/config.yaml:2: unknown key '__proto__' is ignored",
      "/c/config.yaml:4: unknown key 'llama.constructor' is ignored",
      "/c/config.yaml:6: unknown key 'model.hasOwnProperty' is ignored",
    ]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("a config of many keys, under the size cap", () => {
  // 40,000 keys of one mapping, about 400 KB: the yaml library's duplicate check and key
  // lookups are square in them (tens of seconds on the event loop, a minute at 60,000). The
  // bound tells square from linear (0.4–2 s alone, 3 s once in a loaded suite), not a speed.
  const SQUARE_MS = 15_000;
  const keys = (n: number, indent = "") =>
    Array.from({ length: n }, (_, i) => `${indent}key${i}: 1\n`).join("");

  test("unknown keys at the top and in a section load in a moment, the first named with their line", () => {
    const text = `app:\n${keys(40_000, "  ")}${keys(40_000)}`;
    expect(text.length).toBeLessThan(CONFIG_MAX_BYTES);
    const t0 = performance.now();
    const { warnings } = parseConfigText(text, "/c/config.yaml");
    expect(performance.now() - t0).toBeLessThan(SQUARE_MS);
    expect(warnings[0]).toBe("/c/config.yaml:2: unknown key 'app.key0' is ignored");
    expect(warnings[19]).toBe("/c/config.yaml:21: unknown key 'app.key19' is ignored");
  });

  test("a key repeated after them is still config_invalid naming its line, in a moment", () => {
    const t0 = performance.now();
    const err = coreErrorOf(() =>
      parseConfigText(`app:\n${keys(40_000, "  ")}  key7: 2\n`, "/c/config.yaml"),
    );
    expect(performance.now() - t0).toBeLessThan(SQUARE_MS);
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 40_002, key: null } });
    expect(err.message).toBe("/c/config.yaml:40002: YAML syntax error: Map keys must be unique");
  });

  test("repeats the library refused are refused still: flow, nested, in a list, null and number keys", () => {
    for (const [text, line] of [
      ["app: {max_steps: 1, max_steps: 2}\n", 1],
      ["agents:\n  - name: a\n    tools: []\n    name: b\n", 4],
      ["1: a\n1.0: b\n", 2],
      ["? {a: 1, a: 2}\n: x\n", 1],
    ] as const) {
      const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
      expect(err.message).toBe(`/c/config.yaml:${line}: YAML syntax error: Map keys must be unique`);
    }
    // Not repeats: a number and a string, as the library reads them.
    expect(parseConfigText('1: a\n"1": b\n', "/c/config.yaml").warnings).toEqual([
      "/c/config.yaml:2: unknown key '1' is ignored",
    ]);
  });
});

describe("unknown keys by the thousand", () => {
  test("the first are named, the rest counted: doctor's answer stays a line a host reads", async () => {
    using dir = tmpdir();
    // 1 MiB of short unknown keys, as many as the size cap allows.
    const file = join(dir.path, "config.yaml");
    const count = Math.floor(CONFIG_MAX_BYTES / 9);
    writeFileSync(
      file,
      Array.from({ length: count }, (_, i) => `k${i.toString(36).padStart(4, "0")}: 1\n`).join(""),
    );
    const report = await doctorIn(dir.path);
    const config = report.checks.find((c) => c.id === "config")!;
    expect(config.status).toBe("warn");
    const warnings = (config.data as { warnings: string[] }).warnings;
    // Twenty named (load.ts MAX_KEY_WARNINGS), then one for the rest.
    expect(warnings).toHaveLength(21);
    expect(warnings[0]).toBe(`${file}:1: unknown key 'k0000' is ignored`);
    expect(warnings.at(-1)).toBe(`${file}: ${count - 20} more unknown keys are ignored`);
    // The answer was 17 MB here, each warning twice; with a longer path, past the client's 32 MiB.
    expect(JSON.stringify(report).length).toBeLessThan(64 * 1024);
  });
});

test("a schema error of 40,000 issues lists the first 20: every request answers it", () => {
  // Without the cap 20,000 items made ~4 MB of data (200,000 made 39 MB): far past the bound below.
  const text = `mcp_servers:\n${"- {}\n".repeat(20_000)}`;
  expect(text.length).toBeLessThan(CONFIG_MAX_BYTES);
  const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
  expect(err.message).toBe(
    "/c/config.yaml:2: mcp_servers.0.name: expected string, got nothing (the key is missing)",
  );
  const issues = (err.data as { issues: { key: string }[] }).issues;
  expect(issues).toHaveLength(20);
  expect(issues.slice(0, 2).map((i) => i.key)).toEqual(["mcp_servers.0.name", "mcp_servers.0.command"]);
  // 39 MB before, past the 32 MiB line the client reads.
  expect(JSON.stringify(err.data).length).toBeLessThan(64 * 1024);
});

describe("a key that is itself a mapping or a list", () => {
  // The yaml library emits a process warning for it (Node's `(node:PID) Warning: … (Use
  // --trace-warnings …)`) quoting the key: a stray line on the core's stderr, outside the
  // logger and whatever logging.level says, even `silent`. The unknown-key warning names it.
  test("is an unknown key with its line, and no process warning is emitted", () => {
    const emitted: unknown[] = [];
    const original = process.emitWarning;
    process.emitWarning = ((warning: unknown) => {
      emitted.push(warning);
    }) as typeof process.emitWarning;
    try {
      const { warnings } = parseConfigText("app:\n  ? {token: sk-live-1}\n  : 1\n", "/c/config.yaml");
      expect(warnings).toEqual(["/c/config.yaml:2: unknown key 'app.{ token: sk-live-1 }' is ignored"]);
    } finally {
      process.emitWarning = original;
    }
    expect(emitted).toEqual([]);
  });
});

describe("a value that begins with ! (a YAML tag this config does not know)", () => {
  // The yaml library only warns of an unknown tag and reads the value without it: a password
  // `!x9…` became an empty string, passed to the MCP server (or `--api-key ""` to
  // llama-server) without a word; `max_steps: !x 5` was refused as `got string "5"`. YAML's bare
  // `!` (non-specific) the library takes without even a warning: `!` was read as "" and
  // `! x9Secret` lost its `! `.
  test.each([
    [
      "mcp_servers.0.env.PASSWORD",
      "mcp_servers:\n  - name: a\n    command: b\n    env:\n      PASSWORD: !x9Secret\n",
      5,
    ],
    ["llama.extra_args.1", "llama:\n  extra_args: [--api-key, !x9Secret]\n", 2],
    ["app.max_steps", "app:\n  max_steps: !x9Secret 5\n", 2],
    [
      "mcp_servers.0.env.PASSWORD",
      "mcp_servers:\n  - name: a\n    command: b\n    env:\n      PASSWORD: !\n",
      5,
    ],
    [
      "mcp_servers.0.env.PW",
      "mcp_servers:\n  - name: a\n    command: b\n    env:\n      PW: ! x9Secret\n",
      5,
    ],
    ["llama.extra_args.1", "llama:\n  extra_args: [--api-key, !, --jinja]\n", 2],
    ["llama.extra_args.1", "llama:\n  extra_args:\n    - --api-key\n    - ! x9Secret\n", 4],
  ])("%s is config_invalid by its key and line, the tag not quoted", (key, text, line) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key, line } });
    expect(err.message).toStartWith(`/c/config.yaml:${line}: ${key}: `);
    expect(err.message).toContain("quotes");
    expect(JSON.stringify({ m: err.message, d: err.data })).not.toContain("x9Secret");
  });

  // A tag YAML defines whose value the library cannot read as it (`!!float 1`, `!!bool yes`) was
  // told "this config knows none: put the value in quotes", which made it a string, refused again.
  test("a YAML tag the value does not fit names the tag and says to drop it, not to quote", () => {
    const err = coreErrorOf(() => parseConfigText("app:\n  max_steps: !!bool 5\n", "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key: "app.max_steps", line: 2 } });
    expect(err.message).toBe(
      "/c/config.yaml:2: app.max_steps: the value does not read as its tag !!bool says: write it without the tag",
    );
  });

  // A collection tag on a plain value, or !!str on a list or mapping, is YAML's own tag as much:
  // quoted as told, `!!map "x"` was refused again with the same advice.
  test.each([
    ["map", "app:\n  max_steps: !!map x\n"],
    ["seq", "app:\n  max_steps: !!seq '5'\n"],
    ["str", "app:\n  max_steps: !!str [5]\n"],
  ])("!!%s on a value it does not fit names its tag and says to drop it", (tag, text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key: "app.max_steps", line: 2 } });
    expect(err.message).toEndWith(
      `the value does not read as its tag !!${tag} says: write it without the tag`,
    );
  });

  test("the tags YAML defines still read as before", () => {
    const text = 'app:\n  max_steps: !!int "5"\n  data_dir: !!str d\n';
    expect(parseConfigText(text, "/c/config.yaml").config.app.max_steps).toBe(5);
    // A value with ! inside, or quoted, is the value as written.
    // A quoted value under a bare ! is read whole (it only says "a string"): it was refused with
    // "put the value in quotes", which it already was.
    const quoted =
      'mcp_servers:\n  - name: a\n    command: b\n    env: {A: \'!\', B: "! x", C: a!b, D: !!str 12, E: ! "x9"}\n';
    expect(parseConfigText(quoted, "/c/config.yaml").config.mcp_servers[0]?.env).toEqual({
      A: "!",
      B: "! x",
      C: "a!b",
      D: "12",
      E: "x9",
    });
    // So is a block scalar under it (`! |`): its text is all in the block; it was refused the same way.
    const block =
      "mcp_servers:\n  - name: a\n    command: b\n    env:\n      F: ! |\n        x9\n      G: ! >-\n        x9 y\n";
    expect(parseConfigText(block, "/c/config.yaml").config.mcp_servers[0]?.env).toEqual({
      F: "x9\n",
      G: "x9 y",
    });
  });
});

// The walk for an unused anchor in a secret's place (yaml-aliases.ts unusedSecretAnchor) met an
// empty document's null, and a key with no value's: a TypeError out of the loader, every request's
// config refused with a stack trace; and an undefined node ended the walk, its later anchors unseen.
describe("the secret-anchor walk on nodes that are not there", () => {
  test("an empty file, a file of comments, and a key with no value load", () => {
    expect(parseConfigText("", "/c/config.yaml").config.llama.rpc).toEqual([]);
    expect(parseConfigText("# nothing\n", "/c/config.yaml").warnings).toEqual([]);
    expect(parseConfigText("app:\nllama:\n", "/c/config.yaml").config.app).toBeDefined();
  });

  test("an anchored password after a key with no value is still refused", () => {
    const text =
      "app:\nmcp_servers:\n  - name: gh\n    command: npx\n    env:\n      EMPTY:\n      PASSWORD: &Xq9sEcret rest\n";
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err.code).toBe("config_invalid");
    expect(JSON.stringify({ m: err.message, d: err.data })).not.toContain("Xq9sEcret");
  });
});
