import { describe, expect, test } from "bun:test";
import { parseConfigText } from "../../src/config/load.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";

/** setTimeout's limit: a longer delay fires at once. */
const TIMER_MAX_MS = 2 ** 31 - 1;

// Every duration key, with the section text that sets it.
const SECONDS_KEYS = [
  ["llama.startup_timeout_s", (v: number) => `llama:\n  startup_timeout_s: ${v}\n`],
  ["llama.stop_grace_s", (v: number) => `llama:\n  stop_grace_s: ${v}\n`],
  ["llama.request_timeout_s", (v: number) => `llama:\n  request_timeout_s: ${v}\n`],
  ["mcp_servers.0.timeout_s", (v: number) => `mcp_servers:\n  - { name: m, command: x, timeout_s: ${v} }\n`],
  [
    "mcp_servers.0.startup_timeout_s",
    (v: number) => `mcp_servers:\n  - { name: m, command: x, startup_timeout_s: ${v} }\n`,
  ],
] as const;
const MS_KEYS = [
  ["llama.restart_backoff_ms", (v: number) => `llama:\n  restart_backoff_ms: ${v}\n`],
  ["stdio.drain_timeout_ms", (v: number) => `stdio:\n  drain_timeout_ms: ${v}\n`],
] as const;

describe("durations stay within what a timer can wait (issue 10 item 13)", () => {
  test.each(SECONDS_KEYS)("%s: 2147484 s is refused, naming the key; 2147483 s is accepted", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text(2147484), "/c/config.yaml"));
    expect(err.code).toBe("config_invalid");
    expect(err.data!.key).toBe(key);
    expect(err.message).toContain(key);
    expect(err.message).toContain("2147483");
    const { config } = parseConfigText(text(2147483), "/c/config.yaml");
    const value = key.split(".").reduce((o: any, k) => o[k], config) as number;
    expect(value * 1000).toBeLessThan(TIMER_MAX_MS);
  });

  test.each(MS_KEYS)("%s: 2^31 ms is refused, naming the key; 2^31 - 1 is accepted", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text(2 ** 31), "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key } });
    expect(err.message).toContain(key);
    expect(parseConfigText(text(TIMER_MAX_MS), "/c/config.yaml").warnings).toEqual([]);
  });

  test("a fraction of a second that is still a valid delay is kept", () => {
    expect(parseConfigText("llama:\n  stop_grace_s: 0.5\n", "/c/x.yaml").config.llama.stop_grace_s).toBe(0.5);
  });
});

describe("a section whose keys are all commented out is all defaults (issue 10 item 14)", () => {
  const defaults = ConfigSchema.parse({});

  test.each(["app", "llama", "model", "hardware", "memory", "logging", "stdio"])("%s: alone", (section) => {
    const { config, warnings } = parseConfigText(`${section}:\n  # nothing: set\n`, "/c/config.yaml");
    expect(warnings).toEqual([]);
    const key = section as keyof typeof config;
    if (section === "app" || section === "model") {
      // Paths are resolved against the config's folder, the rest is as the defaults.
      expect(config[key]).toEqual(parseConfigText("", "/c/config.yaml").config[key]);
    } else {
      expect(config[key]).toEqual(defaults[key]);
    }
  });

  test("agents: and mcp_servers: alone are their defaults", () => {
    const { config } = parseConfigText("agents:\nmcp_servers:\n", "/c/config.yaml");
    expect(config.agents).toEqual(defaults.agents);
    expect(config.mcp_servers).toEqual([]);
  });

  test("every section empty at once, and ConfigSchema itself, agree", () => {
    const text = Object.keys(defaults)
      .map((s) => `${s}:\n`)
      .join("");
    expect(parseConfigText(text, "/c/config.yaml").config).toEqual(
      parseConfigText("", "/c/config.yaml").config,
    );
    const nulls = Object.fromEntries(Object.keys(defaults).map((s) => [s, null]));
    expect(ConfigSchema.parse(nulls)).toEqual(defaults);
  });

  test("null where a value is required is still an error", () => {
    const err = coreErrorOf(() => parseConfigText("app:\n  max_steps:\n", "/c/config.yaml"));
    expect(err.data!.key).toBe("app.max_steps");
    expect(coreErrorOf(() => parseConfigText("agents:\n  -\n", "/c/config.yaml")).code).toBe(
      "config_invalid",
    );
  });
});

describe("a NUL character in a config string is refused, naming its key", () => {
  test.each([
    ["app.data_dir", 'app:\n  data_dir: "./da\\0ta"\n'],
    ["model.path", 'model:\n  path: "./m\\0.gguf"\n'],
    ["mcp_servers.0.args.1", 'mcp_servers:\n  - { name: m, command: x, args: [a, "b\\0"] }\n'],
    ["mcp_servers.0.env.K", 'mcp_servers:\n  - { name: m, command: x, env: { K: "v\\0" } }\n'],
  ])("%s", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key } });
    expect(err.message).toContain("NUL");
  });

  test("other control characters and unicode pass", () => {
    expect(parseConfigText('app:\n  data_dir: "./d\\tä"\n', "/c/config.yaml").config.app.data_dir).toContain(
      "ä",
    );
  });
});

describe("numbers YAML reads as not finite are named as they are", () => {
  test.each([
    [".inf", "Infinity"],
    ["-.inf", "-Infinity"],
    [".nan", "NaN"],
    ["1e400", "Infinity"],
  ])("startup_timeout_s: %s says 'got number %s', not 'number null'", (text, shown) => {
    const err = coreErrorOf(() =>
      parseConfigText(`llama:\n  startup_timeout_s: ${text}\n`, "/c/config.yaml"),
    );
    expect(err.data!.key).toBe("llama.startup_timeout_s");
    expect(err.message).toContain(`got number ${shown}`);
    expect(err.message).not.toContain("null");
  });

  test("a union key (model.context: .inf) says so too", () => {
    const err = coreErrorOf(() => parseConfigText("model:\n  context: .inf\n", "/c/config.yaml"));
    expect(err.message).toContain("got number Infinity");
  });
});

test("llama.rpc memory_bytes: .inf says Infinity, not null", () => {
  const text = "llama:\n  rpc:\n    - { endpoint: 'h:1', memory_bytes: .inf }\n";
  const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
  expect(err.data!.key).toBe("llama.rpc.0.memory_bytes");
  expect(err.message).toContain("got Infinity");
});

describe("a value where secrets live is never quoted by its error", () => {
  const mcp = (env: string) => `mcp_servers:\n  - name: m\n    command: x\n${env}`;
  test.each([
    ["mcp_servers.0.env.TOKEN", mcp("    env:\n      TOKEN: 918273645546372819\n")],
    ["mcp_servers.0.env.TOKEN", mcp("    env:\n      TOKEN: 0x7a3f91c2\n")],
    ["mcp_servers.0.args.1", mcp("    args: [--token, 918273645546372819]\n")],
    ["mcp_servers.0.env", mcp("    env: 918273645546372819\n")],
    ["llama.extra_args.1", "llama:\n  extra_args: [--api-key, 918273645546372819]\n"],
    [
      "models.0.extra_args.1",
      "models:\n  - { name: m, path: m.gguf, extra_args: [--api-key, 918273645546372819] }\n",
    ],
  ])("%s: the key, its line and the type are named, the value is not", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key } });
    expect(err.message).toContain(`${key}: expected`);
    expect(err.message).toContain("a number (its value not shown; put it in quotes");
    const shown = JSON.stringify({ message: err.message, data: err.data });
    expect(shown).not.toContain("918273645546372819");
    expect(shown).not.toMatch(/9182736455463728\d\d/);
    expect(shown).not.toContain(String(0x7a3f91c2));
  });

  // A server, a model or the llama section written as one command line, as a shell takes it:
  // the key above the secret's place is the one refused, and the value is the whole line.
  test.each([
    ["mcp_servers.0", 'mcp_servers:\n  - "npx -y server --api-key sk-live-918273645546"\n'],
    ["mcp_servers", 'mcp_servers: "npx -y server --api-key sk-live-918273645546"\n'],
    ["models.0", 'models:\n  - "--hf-token hf_918273645546"\n'],
    ["llama", 'llama: "--api-key sk-live-918273645546"\n'],
  ])("%s written as a string: its type is named, the line it holds is not", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key } });
    expect(err.message).toContain("got a string (its value not shown)");
    expect(JSON.stringify({ message: err.message, data: err.data })).not.toContain("918273645546");
  });

  // `- --api-key sk-…` in a block list, or `["--api-key sk-…"]`: one argument, which llama-server
  // refuses ("invalid argument: --api-key sk-…", in the log and the error's log_tail), and which
  // went unmasked into the plan's argv, the log's start line and the child's command line.
  test.each([
    ["llama.extra_args.1", 'llama:\n  extra_args: ["--jinja", "--api-key sk-live-918273645546"]\n'],
    ["llama.extra_args.0", "llama:\n  extra_args:\n    - --api_key=x --hf-token hf_918273645546\n"],
    // llama-server's own secret flags, whose names say nothing of a key (plan/secret-args.ts).
    ["llama.extra_args.0", "llama:\n  extra_args:\n    - -hft hf_918273645546\n"],
    [
      "llama.extra_args.0",
      `llama:\n  extra_args:\n    - '--mcp-servers-json {"s": {"url": "https://m/x", "headers": {"X": "t918273645546"}}}'\n`,
    ],
    [
      "models.0.extra_args.0",
      "models:\n  - name: m\n    path: m.gguf\n    extra_args:\n      - --model-url https://ann:pw918273645546@h/m.gguf\n",
    ],
    // Not first: llama-server quotes the whole entry all the same.
    ["llama.extra_args.0", "llama:\n  extra_args:\n    - --jinja -hft hf_918273645546\n"],
    ["llama.extra_args.0", "llama:\n  extra_args:\n    - -c 4096 -mu https://h/m.gguf?x=918273645546\n"],
  ])("%s: a flag and its credential in one entry is refused, the value not quoted", (key, text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key } });
    expect(err.message).toContain("as two entries");
    expect(JSON.stringify({ message: err.message, data: err.data })).not.toContain("918273645546");
  });

  // The `=` form is one flag and its value, which the launch moves whole to llama-server's
  // environment and the plan shows masked (plan/secret-args.ts): a JSON written with spaces is
  // no second argument, and was taken before the refusal above.
  test.each([
    `llama:\n  extra_args:\n    - '--mcp-servers-json={"s": {"url": "https://m/x", "headers": {"X": "t918273645546"}}}'\n`,
    `llama:\n  extra_args:\n    - '--mcp_servers_json={"s": {"command": "npx", "args": ["-y", "srv"]}}'\n`,
    "llama:\n  extra_args:\n    - --api-key=two words\n",
  ])("a secret flag joined to its value by '=' is taken, spaces in the value or not: %s", (text) => {
    expect(parseConfigText(text, "/c/config.yaml").config.llama.extra_args).toHaveLength(1);
  });

  test.each([
    "llama:\n  extra_args:\n    - --api-key=x -hft hf_918273645546\n",
    "llama:\n  extra_args:\n    - --hf-token=x --mcp-servers-json {}\n",
    // The `=` form of a flag the launch does not move (a misspelt one): llama-server's parser
    // takes no `=` and quotes it whole, and the plan and the log's start line showed it.
    "llama:\n  extra_args:\n    - --api-keys=sk-live-918273645546\n",
    "llama:\n  extra_args:\n    - --proxy=https://ann:pw918273645546@h\n",
  ])("a second flag after an '=' value, or a credential after another flag's '=', is refused: %s", (text) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key: "llama.extra_args.0" } });
    expect(JSON.stringify({ message: err.message, data: err.data })).not.toContain("918273645546");
  });

  // After the plan's own, it won: KV state went where neither llama.kv_disk_bytes nor the erase
  // methods look, and a deleted user's conversations stayed on disk.
  test.each([
    ["llama.extra_args.1", "llama:\n  extra_args: [--jinja, --slot-save-path, /elsewhere]\n"],
    ["llama.extra_args.0", "llama:\n  extra_args: [--slot_save_path, /elsewhere]\n"],
    ["llama.extra_args.0", "llama:\n  extra_args: [--slot-save-path=/elsewhere]\n"],
    [
      "models.0.extra_args.0",
      "models:\n  - name: m\n    path: m.gguf\n    extra_args: [--slot-save-path, /x]\n",
    ],
  ])(
    "%s: --slot-save-path is refused: the core keeps conversations' KV state under data_dir",
    (key, text) => {
      const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
      expect(err).toMatchObject({ code: "config_invalid", data: { key } });
      expect(err.message).toContain("app.data_dir");
    },
  );

  test("a value with spaces after its flag, or a flag with spaces that holds no credential, is taken", () => {
    const text =
      'llama:\n  extra_args: ["--alias", "my model", "-r", "-- User:", "--chat-template", "{{ a }}"]\n';
    expect(parseConfigText(text, "/c/config.yaml").config.llama.extra_args).toHaveLength(6);
  });

  test("elsewhere the value is still shown: it helps, and it is no secret", () => {
    const err = coreErrorOf(() => parseConfigText('app:\n  max_steps: "3"\n', "/c/config.yaml"));
    expect(err.message).toContain('got string "3"');
  });
});

describe("an MCP server's env names are names an environment can hold", () => {
  const env = (name: string) =>
    `mcp_servers:\n  - name: m\n    command: x\n    env:\n      GOOD: "1"\n      ${JSON.stringify(name)}: hf_secret_value\n`;
  test.each([["A=B"], [""], ["TO\u0000K"], ["=x"]])("%j is refused, naming the key and its line", (name) => {
    const err = coreErrorOf(() => parseConfigText(env(name), "/c/config.yaml"));
    expect(err).toMatchObject({
      code: "config_invalid",
      // Cut after an '=': what follows may be a value (the test at the end of this file).
      data: { key: `mcp_servers.0.env.${name.replace(/=.*/s, "=…")}`, line: 6 },
    });
    expect(err.message).toContain("an environment variable's name is not empty and holds no '=' or NUL");
    expect(err.message).not.toContain("hf_secret_value");
  });

  test("names with dots, dashes, lower case and unicode pass as they are", () => {
    const { config } = parseConfigText(env("my.var-é"), "/c/config.yaml");
    expect(config.mcp_servers[0]!.env).toEqual({ GOOD: "1", "my.var-é": "hf_secret_value" });
  });
});

test("a required key left out is named as missing, not as 'undefined undefined'", () => {
  const leftOut: Record<string, string> = {
    "mcp_servers.0.name": "mcp_servers:\n  - command: x\n",
    "mcp_servers.0.command": "mcp_servers:\n  - name: a\n",
    "agents.0.name": "agents:\n  - system_prompt: x\n",
    "models.0.path": "models:\n  - name: b\n",
  };
  for (const [key, text] of Object.entries(leftOut)) {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key, line: 2 } });
    expect(err.message).toBe(`/c/config.yaml:2: ${key}: expected string, got nothing (the key is missing)`);
  }
});

describe("a long value or key is shown by its start: every request answers the config's error", () => {
  const big = "x".repeat(500_000);
  test.each([
    ["agents.0.model", `agents:\n  - {name: a, model: ${big}}\n`, "no model named 'xxx"],
    ["llama.rpc.0", `llama:\n  rpc: ["${big}"]\n`, "is not host:port"],
    ["app.max_steps", `app:\n  max_steps: "${"a ".repeat(200_000)}"\n`, 'got string "a a a'],
  ])("%s", (key, text, says) => {
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { key, line: 2 } });
    expect(err.message).toStartWith(`/c/config.yaml:2: ${key}: `);
    expect(err.message).toContain(says);
    expect(err.message.length).toBeLessThan(1100);
    expect(JSON.stringify(err.data).length).toBeLessThan(2500);
  });

  test("an env name of 500 KB is named by its start, in the message and in data", () => {
    const text = `mcp_servers:\n  - {name: a, command: x, env: {"${big}=": y}}\n`;
    const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
    expect(err.message).toStartWith(`/c/config.yaml:2: mcp_servers.0.env.${"x".repeat(80)}`);
    expect(err.message).toContain("an environment variable's name is not empty");
    expect(JSON.stringify({ m: err.message, d: err.data }).length).toBeLessThan(2500);
  });

  // The alias check's message quoted the name twice: a 1 MB line for every request.
  test("an alias of a 500 KB name with no anchor is named by its start", () => {
    const err = coreErrorOf(() => parseConfigText(`app:\n  max_steps: *${big}\n`, "/c/config.yaml"));
    expect(err).toMatchObject({ code: "config_invalid", data: { line: 2, key: null } });
    expect(err.message).toStartWith(`/c/config.yaml:2: alias *${"x".repeat(80)}`);
    expect(err.message.length).toBeLessThan(1100);
  });
});

test("llama.log_files is at most 100: each rotation renames every file, on the event loop", () => {
  const err = coreErrorOf(() => parseConfigText("llama:\n  log_files: 10000000\n", "/c/config.yaml"));
  expect(err).toMatchObject({ code: "config_invalid", data: { key: "llama.log_files", line: 2 } });
  expect(err.message).toBe(
    "/c/config.yaml:2: llama.log_files: at most 100 (each rotation renames every file)",
  );
  expect(parseConfigText("llama:\n  log_files: 100\n", "/c/config.yaml").config.llama.log_files).toBe(100);
});

// `TOKEN=sk-…:` written for `TOKEN: sk-…`: the name's '=' refused, its value was quoted as the key.
test("an env name holding '=' is shown up to it: what follows is most likely its value", () => {
  const text = 'mcp_servers:\n  - name: a\n    command: x\n    env:\n      TOKEN=sk-live-123: ""\n';
  const err = coreErrorOf(() => parseConfigText(text, "/c/config.yaml"));
  expect(err).toMatchObject({ code: "config_invalid", data: { key: "mcp_servers.0.env.TOKEN=…", line: 5 } });
  expect(err.message).toStartWith("/c/config.yaml:5: mcp_servers.0.env.TOKEN=…: ");
  expect(JSON.stringify({ m: err.message, d: err.data })).not.toContain("sk-live");
});

// docs/agent.md#approval: an entry is a tool's name or `*`; `write_*` matched no tool, so every
// write tool ran without approval while the config read as if they needed it (fails open).
describe("mcp_servers requires_approval", () => {
  const text = (entry: string) =>
    `mcp_servers:\n  - { name: m, command: x, requires_approval: [${JSON.stringify(entry)}] }\n`;
  test.each(["write_*", "m.write_file", "*write", "write file"])("%s is refused, naming the key", (entry) => {
    const err = coreErrorOf(() => parseConfigText(text(entry), "/c/config.yaml"));
    expect(err.code).toBe("config_invalid");
    expect(err.data!.key).toBe("mcp_servers.0.requires_approval.0");
  });
  test.each(["*", "write_file", "Delete-All"])("%s is accepted", (entry) => {
    const { config } = parseConfigText(text(entry), "/c/config.yaml");
    expect(config.mcp_servers[0]?.requires_approval).toEqual([entry]);
  });
});
