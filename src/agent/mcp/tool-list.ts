import { MAX_NAME_RUN_BYTES } from "../../protocol/schema-names.ts";
import { toolSchemaProblem } from "../../protocol/schema-problem.ts";
import { MAX_JSON_DEPTH, nestedDeeperThan } from "../../util/json-depth.ts";
import { terminalText } from "../../util/terminal-text.ts";
import { wholeCharCut } from "../../util/text-cut.ts";

export interface McpToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/**
 * What a server's tools/list may put before the model (docs/agent.md, MCP servers). A name goes
 * into the `<server>__<tool>` function name and the chat template as is, so it is the OpenAI
 * function-name alphabet; the caps keep a hostile or huge list from filling every prompt.
 */
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
export const MAX_TOOLS_PER_SERVER = 128;
export const MAX_DESCRIPTION_CHARS = 4096;
export const MAX_SCHEMA_CHARS = 16_384;
/**
 * Pages of a tools/list read at most (MCP lists in pages by a cursor): a server whose pages never
 * end costs a warning, not its start's whole startup_timeout_s.
 */
export const MAX_LIST_PAGES = 16;
/** A next page's cursor longer than this is not sent back: the server wrote it to be. */
export const MAX_CURSOR_CHARS = 4096;

export interface VettedTools {
  tools: McpToolInfo[];
  /** Why some listed tools were left out, for the `tools_unavailable` warning; null when none were. */
  dropped: string | null;
  /** The names of those left out (a name that is one): an agent's pattern naming one is no typo. */
  unfit: string[];
}

interface Listed {
  name: unknown;
  description?: unknown;
  inputSchema?: unknown;
}

type Reason = "object" | "name" | "duplicate" | "shape" | "deep" | "schema" | "cycle" | "run" | "count";
const REASON_TEXT: Record<Reason, string> = {
  object: "that are not objects",
  name: "named other than 1-64 letters, digits, _ or -",
  duplicate: "listed twice",
  shape: "with an input schema that is not an object's",
  deep: `with an input schema nested over ${MAX_JSON_DEPTH} levels`,
  schema: `with an input schema over ${MAX_SCHEMA_CHARS} characters`,
  cycle:
    "with an input schema whose $ref cycle never reaches a value (llama-server's converter follows it without end)",
  run: `with a property name or $ref of over ${MAX_NAME_RUN_BYTES} bytes in a row outside A-Z, a-z, 0-9 and - (llama-server's converter crashes on it)`,
  count: `past the first ${MAX_TOOLS_PER_SERVER}`,
};
const SAMPLES = 3;

/**
 * Keeps the tools fit to offer: valid unique names, bounded schemas, at most MAX_TOOLS_PER_SERVER.
 * A schema's vetting takes up to milliseconds (a walk of its JSON up to MAX_SCHEMA_CHARS), and a
 * list of MAX_TOOLS_PER_SERVER such tools held the loop, ping and cancel with it, for its whole
 * length: the loop's turn comes before each tool whose schema is read, and every
 * MAX_TOOLS_PER_SERVER of the others (a name's check, but a page may list hundreds of thousands).
 */
export async function vetTools(listed: readonly unknown[]): Promise<VettedTools> {
  const tools: McpToolInfo[] = [];
  const seen = new Set<string>();
  const dropped = new Map<Reason, string[]>();
  const unfit: string[] = [];
  let unturned = 0;
  for (const item of listed) {
    // Unchecked by the SDK (connect.ts): anything, a tool or not.
    const t = isObject(item) ? (item as unknown as Listed) : undefined;
    const name = t ? t.name : item;
    const early = listReason(t, seen, tools.length);
    if (early === undefined || ++unturned >= MAX_TOOLS_PER_SERVER) {
      unturned = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const schema = t?.inputSchema === undefined ? { type: "object" } : t.inputSchema;
    const reason = early ?? schemaReason(schema);
    if (reason) {
      if (typeof name === "string") unfit.push(name);
      const names = dropped.get(reason) ?? [];
      names.push(sample(name));
      dropped.set(reason, names);
      continue;
    }
    seen.add(name as string);
    const description = typeof t?.description === "string" ? t.description : "";
    tools.push({
      name: name as string,
      // Between characters: half an emoji is a lone surrogate, which llama-server's parser refuses.
      description: description.slice(0, wholeCharCut(description, MAX_DESCRIPTION_CHARS)),
      inputSchema: schema as Record<string, unknown>,
    });
  }
  return { tools, dropped: describe(dropped, listed.length), unfit };
}

/** Why a listed item is left out before its schema is read, or undefined when that is next. */
function listReason(t: Listed | undefined, seen: Set<string>, kept: number): Reason | undefined {
  if (!t) return "object";
  if (typeof t.name !== "string" || !TOOL_NAME.test(t.name)) return "name";
  if (seen.has(t.name)) return "duplicate";
  return kept >= MAX_TOOLS_PER_SERVER ? "count" : undefined;
}

/** Why a tool's input schema is left out, or undefined when it is fit to offer. */
function schemaReason(schema: unknown): Reason | undefined {
  // The model's arguments must be an object (tool-calls.ts): a schema for anything else cannot be met.
  if (!isObject(schema) || (schema.type !== undefined && schema.type !== "object")) return "shape";
  // Told before the walks below, each of all of it: a 16 MiB schema's stringify held the loop
  // 30-60 ms, its depth's walk and stringify 150-230 ms for 100,000 properties.
  const bound = pastBounds(schema);
  if (bound) return bound;
  // Before the stringify, which would throw on it and fail the whole list.
  if (nestedDeeperThan(schema)) return "deep";
  // The bound that keeps the walk below to milliseconds, whatever size a tools/list line may be.
  if (JSON.stringify(schema).length > MAX_SCHEMA_CHARS) return "schema";
  // Offered, either crashed llama-server at every request (SIGSEGV), the probes for a refused
  // schema (tool-refusals.ts) included: left out here, before any request.
  return toolSchemaProblem(schema);
}

/**
 * `deep` or `schema` when a walk that stops at the first bound passed finds it: nesting past
 * MAX_JSON_DEPTH, or more than MAX_SCHEMA_CHARS of JSON counted at the least (each string, key and
 * other value as its shortest text, escapes not counted). Undefined: the exact checks decide.
 */
function pastBounds(schema: object): "deep" | "schema" | undefined {
  let chars = 0;
  const pending: [unknown, number][] = [[schema, 1]];
  for (let item = pending.pop(); item; item = pending.pop()) {
    const [value, depth] = item;
    if (typeof value === "string") chars += value.length + 2;
    else if (typeof value !== "object" || value === null) chars += 1;
    else if (depth > MAX_JSON_DEPTH) return "deep";
    else if (Array.isArray(value)) {
      // Its brackets and the commas between its items.
      chars += 1 + Math.max(1, value.length);
      for (let i = 0; i < value.length && chars <= MAX_SCHEMA_CHARS; i++) pending.push([value[i], depth + 1]);
    } else {
      // Its braces, `"key":` before each value and the commas between them (an empty one counted 1).
      chars += 1;
      for (const key in value) {
        if (chars > MAX_SCHEMA_CHARS) break;
        chars += key.length + 4;
        pending.push([(value as Record<string, unknown>)[key], depth + 1]);
      }
    }
    if (chars > MAX_SCHEMA_CHARS) return "schema";
  }
  return undefined;
}

function describe(dropped: Map<Reason, string[]>, total: number): string | null {
  if (dropped.size === 0) return null;
  const count = [...dropped.values()].reduce((n, names) => n + names.length, 0);
  const parts = [...dropped].map(([reason, names]) => {
    const shown = names.slice(0, SAMPLES).join(", ");
    return `${names.length} ${REASON_TEXT[reason]} (${shown}${names.length > SAMPLES ? ", …" : ""})`;
  });
  return `${count} of the ${total} tools it listed were left out: ${parts.join("; ")}`;
}

/**
 * A name for a message: quoted and escaped (it may hold anything), at most 40 characters of it.
 * JSON.stringify escapes only C0 controls: the bidi overrides, C1 controls and line separators
 * that would reorder or break the host's text are escaped as the log escapes them.
 */
function sample(name: unknown): string {
  if (typeof name !== "string") return String(typeof name);
  return terminalText(JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
