import { statSync } from "node:fs";
import { homedir } from "node:os";
import * as nodePath from "node:path";
import { dirname, resolve } from "node:path";
import { isMap, LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { CoreError } from "../protocol/errors.ts";
import { HF_PREFIX } from "../protocol/model-ref.ts";
import { windowsDevicePath } from "../util/device-path.ts";
import { isFullPath, type PathRules } from "../util/full-path.ts";
import { expandHome } from "../util/home-path.ts";
import { oneLine } from "../util/one-line.ts";
import { cutText } from "../util/text-cut.ts";
import { readConfigFile } from "./config-file.ts";
import { shownEntry } from "./rpc-endpoint.ts";
import { type Config, ConfigSchema, type LoadedConfig } from "./schema.ts";
import { refuseMergeKey, unknownKeys } from "./unknown-keys.ts";
import { aliasProblem, MAX_ALIAS_NODES, unusedSecretAnchor } from "./yaml-aliases.ts";
import { duplicateKeyOffset, KeyIndex, nonSpecificTagOffset, pathAt, tagProblem } from "./yaml-keys.ts";

export const DEFAULT_CONFIG_FILE = "config.yaml";

/**
 * Unknown keys named one by one (the rest are counted in one more warning), and schema issues
 * listed in config_invalid's `data.issues`. An unknown key is a log line at start-up and part
 * of doctor's answer, twice: 116,000 of them (a 1 MiB file) made that answer a line of 17 MB,
 * past the 32 MiB the client reads once the path is 90 characters.
 */
export const MAX_KEY_WARNINGS = 20;

/**
 * A key or an issue as a message shows it: each long word (a value it quotes) cut, and the
 * whole. Every request that needs the config answers its error, and a value of 500 KB
 * (`agents: [{name: a, model: xxx…}]`) was quoted whole, in the message and in `data`: a 1 MB
 * line for each.
 */
const shown = (text: string): string =>
  cutText(
    text.replace(/\S{121,}/g, (word) => cutText(word, 120)),
    1000,
  );

/**
 * A key path as an error shows it. An MCP server's env name holding '=' is cut after it: what
 * follows is most likely a value (`TOKEN=sk-…:` written for `TOKEN: sk-…`), and env values are
 * never quoted (mayBeSecret).
 */
function shownPath(path: readonly string[]): string {
  const [section, , third, name] = path;
  const cut = section === "mcp_servers" && third === "env" && name?.includes("=");
  const shownName = cut ? `${name?.slice(0, name.indexOf("="))}=…` : undefined;
  return shown(
    (shownName === undefined ? path : [...path.slice(0, 3), shownName, ...path.slice(4)]).join("."),
  );
}

/**
 * `config_invalid` for a config file's path (`--config`) that can name no config file: an empty
 * one (`--config "$CFG"` with CFG unset), which resolves to the working folder, and one that
 * names a Windows device or pipe, by its spelling as the config's own paths are
 * (device-paths.ts): called before anything stats it, since on Windows a stat connects to a
 * pipe's server and a read of `CON` never ends.
 */
export function refuseConfigPath(path: string, rules: PathRules = nodePath): void {
  if (path === "")
    throw new CoreError("config_invalid", "--config is empty: name a YAML config file", {
      file: path,
      line: null,
      key: null,
    });
  const device = windowsDevicePath(path, rules);
  if (device)
    throw new CoreError("config_invalid", `${oneLine(path)} ${device}`, {
      file: path,
      line: null,
      key: null,
    });
}

/**
 * Reads, validates and resolves config.yaml. Throws CoreError `config_missing` when there is
 * no file, `config_invalid` (with file, line and key) when it cannot be used. `rules`: path.win32 in tests.
 */
export function loadConfig(
  path: string,
  cwd: string = process.cwd(),
  rules: PathRules = nodePath,
): LoadedConfig {
  refuseConfigPath(path, rules);
  const file = resolve(cwd, path);
  // Only a path that names nothing is missing: a loop of links, a folder not searchable… are
  // the file's problem, named by the read (config-file.ts).
  if (statCode(file) === "ENOENT") {
    throw new CoreError("config_missing", `no config file at ${file}`, { file });
  }
  return parseConfigText(readConfigFile(file), file);
}

/** The pure part of loadConfig: text in, resolved config out. */
export function parseConfigText(text: string, file: string): LoadedConfig {
  const lineCounter = new LineCounter();
  // Repeated keys are found below, in one pass (yaml-keys.ts): the library's check is square.
  // logLevel "error": its warnings went to process.emitWarning, a stray stderr line quoting the
  // file (a key that is a mapping) past logging.level; errors are read from doc.errors.
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: false, logLevel: "error" });
  const duplicate = doc.errors.length === 0 ? duplicateKeyOffset(doc.contents) : null;
  const yamlError =
    doc.errors[0] ??
    (duplicate === null
      ? undefined
      : { message: "Map keys must be unique", pos: [duplicate], linePos: undefined });
  if (yamlError) {
    const line = yamlError.linePos?.[0]?.line ?? lineOf(lineCounter, yamlError.pos[0]);
    // The parser quotes a block scalar's header line whole (`key: |value`): a value, maybe a
    // token, written where the header goes. Its line is named; its text is not.
    const said = (yamlError.message.split("\n")[0] ?? "").replace(
      /^(Block scalar header includes extra characters):.*$/,
      "$1",
    );
    // The parser's own recursion ran out: say what the file did, not what the runtime felt.
    const reason = /call stack/i.test(said) ? "nested too deeply to read" : shown(said);
    throw new CoreError("config_invalid", `${file}:${line}: YAML syntax error: ${reason}`, {
      file,
      line,
      key: null,
    });
  }
  refuseUnknownTag(doc, lineCounter, file);
  const raw = toPlainData(doc, lineCounter, file);
  if (!isMap(doc.contents) && doc.contents !== null) {
    throw new CoreError(
      "config_invalid",
      `${file}:1: the config must be a mapping of sections (app, llama, model, …)`,
      {
        file,
        line: 1,
        key: null,
      },
    );
  }

  const keys = new KeyIndex();
  const lineOfKey = (key: string) => lineOfPath(doc, keys, lineCounter, key.split("."));
  const unknown = unknownKeys(ConfigSchema, raw);
  // Once per load: zod's compiled fast path cost `initialize` ~10 ms more than it saves (performance.md).
  const parsed = ConfigSchema.safeParse(raw, { reportInput: true, jitless: true });
  // Also one in a map of free names (env), where the merged mapping is a wrong value.
  const refused = parsed.success ? [] : parsed.error.issues.map((i) => i.path.map(String).join("."));
  refuseMergeKey([...unknown, ...refused], file, lineOfKey, (key) => shownPath(key.split(".")));
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as z.core.$ZodIssue;
    const keyPath = issue.path.map(String);
    const key = shownPath(keyPath) || "(root)";
    const line = lineOfPath(doc, keys, lineCounter, issue.path as (string | number)[]);
    const where = line ? `${file}:${line}` : file;
    const said = shown(describeIssue(withoutCredentials(issue, keyPath), mayBeSecret(keyPath)));
    throw new CoreError("config_invalid", `${where}: ${key}: ${said}`, {
      file,
      line: line ?? null,
      key,
      // The first few: every request that needs the config answers this error, and 200,000
      // empty mcp_servers entries (1 MiB) made it a line of 39 MB, past what the client reads.
      issues: parsed.error.issues
        .slice(0, MAX_KEY_WARNINGS)
        .map((i) => ({ key: shownPath(i.path.map(String)), message: shown(i.message) })),
    });
  }

  const warnings = unknown.slice(0, MAX_KEY_WARNINGS).map((key) => {
    const line = lineOfKey(key);
    return `${line ? `${file}:${line}` : file}: unknown key '${shown(key)}' is ignored`;
  });
  if (unknown.length > MAX_KEY_WARNINGS)
    warnings.push(`${file}: ${unknown.length - MAX_KEY_WARNINGS} more unknown keys are ignored`);
  const dir = dirname(file);
  return { config: resolvePaths(parsed.data, dir), file, dir, warnings };
}

/**
 * A tag the yaml library does not know (`PASSWORD: !x9…`, a value that begins with `!`) is only
 * its warning, and the value is read without it: a password became "" without a word. So is
 * YAML's bare `!`, which the library takes with no warning at all (yaml-keys.ts). Refused
 * by key and line; the tag is not quoted, since it may be that value.
 */
function refuseUnknownTag(
  doc: ReturnType<typeof parseDocument>,
  lineCounter: LineCounter,
  file: string,
): void {
  const warning = doc.warnings.find((w) => w.code === "TAG_RESOLVE_FAILED");
  const offset = warning?.pos[0] ?? nonSpecificTagOffset(doc.contents);
  if (offset === undefined || offset === null) return;
  const line = lineOf(lineCounter, offset) ?? null;
  const key = shownPath(pathAt(doc.contents, offset)) || null;
  const said = tagProblem(warning?.message);
  throw new CoreError("config_invalid", `${file}:${line}: ${key ? `${key}: ` : ""}${said}`, {
    file,
    line,
    key,
  });
}

/**
 * The document as plain data. Alias trouble is found first, with its line; the library's own
 * alias limit is set no lower than that check's, so it only backs it up, as does the catch for
 * any other failure while converting (reported without a line rather than as an internal error).
 */
function toPlainData(doc: ReturnType<typeof parseDocument>, lineCounter: LineCounter, file: string): unknown {
  const problem = aliasProblem(doc.contents);
  if (problem) {
    const line = lineOf(lineCounter, problem.offset);
    // A value that begins with `*` is read as an alias: where a value may be a secret (a
    // password in an MCP server's env), its "name" is not quoted.
    const key =
      problem.unanchored && mayBeSecret(problem.unanchored.path) ? shownPath(problem.unanchored.path) : null;
    const message =
      key === null
        ? shown(problem.message) // it quotes the alias or anchor's name, which may be as long as the file
        : `${key}: a value that begins with * is read as an alias, and no anchor of its name is before it: put the value in quotes`;
    throw new CoreError("config_invalid", `${file}:${line}: ${message}`, { file, line, key });
  }
  const anchor = unusedSecretAnchor(doc.contents, mayBeSecret);
  if (anchor) {
    const [line, key] = [lineOf(lineCounter, anchor.offset), shownPath(anchor.path)];
    const said =
      "a value that begins with & is read as an anchor, which no alias uses: put the value in quotes";
    throw new CoreError("config_invalid", `${file}:${line}: ${key}: ${said}`, { file, line, key });
  }
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_NODES }) ?? {};
  } catch (err) {
    const reason = shown((err as Error).message.split("\n")[0] ?? "");
    throw new CoreError("config_invalid", `${file}: cannot convert the YAML: ${reason}`, {
      file,
      line: null,
      key: null,
    });
  }
}

/** A config from defaults alone, for commands that can run without a file. */
export function defaultConfig(dir: string = process.cwd()): LoadedConfig {
  return { config: resolvePaths(ConfigSchema.parse({}), dir), file: null, dir, warnings: [] };
}

/**
 * Where a value may be a secret: an MCP server's env (tokens) and the arguments a command gets
 * (`--api-key N`, masked in the plan report too: plan/secret-args.ts), and each key above them,
 * where a server, a model or the llama section written as one command line
 * (`- "npx server --api-key sk-…"`) is the value refused. An error there names the key and the
 * type it found, never the value: the message goes to the host, its logs and issues.
 */
function mayBeSecret(path: string[]): boolean {
  const [section, second, third] = path;
  if (section === "llama") return second === undefined || second === "extra_args";
  if (section === "models") return third === undefined || third === "extra_args";
  if (section === "mcp_servers") return third === undefined || third === "env" || third === "args";
  return false;
}

/**
 * One RPC worker written without the list (`rpc: user:pw@host:port`) is refused as not a list,
 * before the entry's own check: its value is quoted as that check quotes an entry, all up to
 * its '@' left out (rpc-endpoint.ts `shownEntry`).
 */
function withoutCredentials(issue: z.core.$ZodIssue, path: readonly string[]): z.core.$ZodIssue {
  if (path.join(".") !== "llama.rpc" || issue.code !== "invalid_type" || typeof issue.input !== "string")
    return issue;
  return { ...issue, input: shownEntry(issue.input) };
}

function describeIssue(issue: z.core.$ZodIssue, hideValue: boolean): string {
  const got = (value: unknown) => (hideValue ? describeType(value) : describeReceived(value));
  if (issue.code === "invalid_type") return `expected ${issue.expected}, got ${got(issue.input)}`;
  if (issue.code === "invalid_value")
    return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  if (issue.code === "invalid_union") return `expected ${unionChoices(issue)}, got ${got(issue.input)}`;
  // A mapping's key refused (an env name): zod's own words are "Invalid key in record".
  if (issue.code === "invalid_key") return issue.issues[0]?.message ?? issue.message;
  return issue.message;
}

/** What a value is without what it holds: `a number`, and how to make it text where that helps. */
function describeType(value: unknown): string {
  if (value === null || value === undefined || typeof value === "object") return describeReceived(value);
  const hint = typeof value === "string" ? "" : "; put it in quotes to make it a string";
  return `a ${typeof value} (its value not shown${hint})`;
}

function unionChoices(issue: z.core.$ZodIssueInvalidUnion): string {
  const choices = issue.errors.flatMap((branch) =>
    branch.map((i) => {
      if (i.code === "invalid_value") return i.values.map((v) => JSON.stringify(v)).join(" or ");
      if (i.code === "invalid_type") return `a ${i.expected}`;
      return i.message;
    }),
  );
  return [...new Set(choices)].join(" or ");
}

function describeReceived(value: unknown): string {
  // A required key left out (`command:` not written): zod's input is undefined.
  if (value === undefined) return "nothing (the key is missing)";
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  // JSON has no Infinity or NaN (`.inf`, `1e400`, `.nan`): it would say "number null".
  if (typeof value === "number" && !Number.isFinite(value)) return `number ${value}`;
  return `${typeof value} ${JSON.stringify(value)}`;
}

function lineOf(counter: LineCounter, offset: number | undefined): number | undefined {
  return offset === undefined ? undefined : counter.linePos(offset).line;
}

/** The line of the deepest node along `path` that exists in the document. */
function lineOfPath(
  doc: ReturnType<typeof parseDocument>,
  keys: KeyIndex,
  counter: LineCounter,
  path: (string | number)[],
): number | undefined {
  for (let n = path.length; n > 0; n--) {
    const node = keys.nodeAt(doc.contents, path.slice(0, n)) as
      | { range?: [number, number, number] }
      | undefined;
    if (node && typeof node === "object" && node.range) return lineOf(counter, node.range[0]);
    // The node may be a scalar-less key (e.g. `max_steps:` with no value): find the pair's key.
    const parent = keys.nodeAt(doc.contents, path.slice(0, n - 1));
    if (isMap(parent)) {
      const pair = keys.pair(parent, path[n - 1]);
      const keyRange = (pair?.key as { range?: [number, number, number] } | undefined)?.range;
      if (keyRange) return lineOf(counter, keyRange[0]);
    }
  }
  return undefined;
}

/** A path of the config: `~/` the home folder, else relative to the config's folder (docs/bootstrap.md). */
function abs(dir: string, p: string): string {
  return configPath(dir, p, homedir());
}

/**
 * `p` as abs() takes it, by `rules` (path.win32 in tests). On Windows `\data` is absolute to
 * path.win32 but names a folder on the drive of the core's working folder, which the host picks at
 * each start: it is taken on the config's drive, as a relative path is from the config's folder.
 */
export function configPath(dir: string, p: string, home: string, rules: PathRules = nodePath): string {
  const path = expandHome(p, home);
  return isFullPath(path, rules) ? path : rules.resolve(dir, path);
}

/** Commands with a slash are paths relative to the config; bare names are looked up on PATH. */
function commandPath(dir: string, command: string): string {
  return command.includes("/") || command.includes("\\") ? abs(dir, command) : command;
}

function modelPath(dir: string, p: string): string {
  return p.startsWith(HF_PREFIX) ? p : abs(dir, p);
}

/** `auto` and `none` are words, anything else a projector file as model.path names one (docs/models.md "The projector"). */
function mmprojPath(dir: string, p: string): string {
  return p === "auto" || p === "none" ? p : modelPath(dir, p);
}

function resolvePaths(config: Config, dir: string): Config {
  return {
    ...config,
    app: { ...config.app, data_dir: abs(dir, config.app.data_dir) },
    llama: { ...config.llama, binary: config.llama.binary === null ? null : abs(dir, config.llama.binary) },
    // `hf:` paths name the Hugging Face cache, resolved when the model is read (models/resolve.ts).
    model: {
      ...config.model,
      path: modelPath(dir, config.model.path),
      mmproj: mmprojPath(dir, config.model.mmproj),
    },
    models: config.models.map((m) => ({
      ...m,
      path: modelPath(dir, m.path),
      mmproj: mmprojPath(dir, m.mmproj),
    })),
    mcp_servers: config.mcp_servers.map((s) => ({
      ...s,
      command: commandPath(dir, s.command),
      ...(s.cwd ? { cwd: abs(dir, s.cwd) } : {}),
    })),
    memory: { ...config.memory, folders: config.memory.folders.map((f) => abs(dir, f)) },
  };
}

function statCode(file: string): string | undefined {
  try {
    statSync(file);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  }
}
