import { LlmError } from "../../llama/errors.ts";
import { callJson, type LlamaEndpoint } from "../../llama/http.ts";
import { wellFormedJson } from "../../llama/well-formed.ts";
import type { Warning } from "../../protocol/chat.ts";
import { keepLatest } from "../../util/keep-latest.ts";
import { cutText } from "../../util/text-cut.ts";
import { toolNameOf } from "../tool-registry.ts";

/**
 * Tools llama-server cannot offer (docs/agent.md, "MCP servers"): an input schema its grammar
 * converter refuses (a `$ref` to another document, say) fails the whole request with a 400, every
 * step of every turn of the agent (test/fixtures/llama-server/transcripts/95e). Such a tool is
 * found by asking `/apply-template` (which refuses the same body alike, and runs nothing) about
 * halves of the list, and left out with a `tools_unavailable` warning; what a server refused is
 * kept for that server's life, so later turns leave the tool out without a failed request.
 */
const refusedBy = new WeakMap<object, Map<string, string>>();

/** llama-server's 400 for a schema its grammar converter cannot take (95d, 95e). */
export function schemaRefused(err: unknown): err is LlmError {
  return err instanceof LlmError && err.status === 400 && /schema|grammar|parser/i.test(err.message);
}

const keyOf = (tool: unknown) => JSON.stringify(tool);
const nameOf = (tool: unknown) => toolNameOf(tool) ?? "(unnamed)";

/** How long one /apply-template probe may take. */
const PROBE_TIMEOUT_MS = 10_000;
/** Refused tools kept per server: two servers' full lists (tool-list.ts MAX_TOOLS_PER_SERVER). */
const REFUSALS_KEPT = 256;
/** Names shown in the warning; the rest counted. */
const SAMPLES = 3;
/** What the warning quotes of llama-server's reason: the real one quotes the whole schema (95d). */
const REASON_CHARS = 200;

/**
 * One warning for the tools left out, a few named and the first one's reason cut: the real
 * server's reason for a ref that leads nowhere quotes the whole schema (up to MAX_SCHEMA_CHARS of
 * an MCP server's), and a warning per tool would put 128 of them into every result.
 */
function warning(left: { tool: unknown; reason: string }[]): Warning {
  const names = left.slice(0, SAMPLES).map((l) => nameOf(l.tool));
  const more = left.length > SAMPLES ? ", …" : "";
  const last = (left[0]?.reason ?? "").split("\n").pop() ?? "";
  const reason = cutText(last, REASON_CHARS);
  const count = left.length === 1 ? "the tool" : `${left.length} tools`;
  return {
    code: "tools_unavailable",
    message: `${count} ${names.join(", ")}${more} left out, the turn ran without them: llama-server cannot use their input schemas (${reason})`,
  };
}

/** What `server`'s refusals hold: how many tools, their reasons' characters (tests count them). */
export function refusalsKept(server: object): { count: number; reasonChars: number } {
  const refused = [...(refusedBy.get(server)?.values() ?? [])];
  return { count: refused.length, reasonChars: refused.reduce((n, r) => n + r.length, 0) };
}

/** Takes out of `tools` (in place) those `server` already refused; one warning for them all. */
export function dropKnownRefused(server: object, tools: unknown[], warnings: Warning[]): void {
  const refused = refusedBy.get(server);
  if (refused) dropWith((k) => refused.get(k), tools, warnings);
}

function dropWith(
  reasonOf: (key: string) => string | undefined,
  tools: unknown[],
  warnings: Warning[],
): void {
  const left: { tool: unknown; reason: string }[] = [];
  for (let i = tools.length - 1; i >= 0; i--) {
    const reason = reasonOf(keyOf(tools[i]));
    if (reason === undefined) continue;
    left.unshift({ tool: tools[i], reason });
    tools.splice(i, 1);
  }
  if (left.length > 0) warnings.push(warning(left));
}

/** llama-server's words for a grammar it made but could not parse, at sampler set-up (95f). */
const GRAMMAR_PARSE = /failed to parse grammar/i;

/**
 * One tool's input schema as `/completion`'s `json_schema` with nothing to predict: refused at
 * once when its grammar cannot be parsed (95f), else one token read and one made, in the turn's
 * own slot when it holds one (another session's cached prompt is not pushed out for a probe).
 * Null: the grammar is taken.
 */
async function grammarProbe(
  endpoint: LlamaEndpoint,
  tool: unknown,
  slot: number | undefined,
  signal: AbortSignal,
): Promise<string | null> {
  const schema = (tool as { function?: { parameters?: unknown } } | null)?.function?.parameters;
  if (typeof schema !== "object" || schema === null) return null;
  const body = {
    prompt: "",
    n_predict: 0,
    json_schema: schema,
    ...(slot === undefined ? {} : { id_slot: slot }),
  };
  return refusalOf(endpoint, "/completion", body, signal);
}

/**
 * A probe's answer: null where llama-server took `body` at `path`, its reason where it refused
 * the schema; any other failure thrown (a probe that hangs is a server that hangs).
 */
async function refusalOf(
  endpoint: LlamaEndpoint,
  path: string,
  body: unknown,
  signal: AbortSignal,
): Promise<string | null> {
  try {
    const within = AbortSignal.any([signal, AbortSignal.timeout(PROBE_TIMEOUT_MS)]);
    await callJson(endpoint, path, { body: wellFormedJson(body), signal: within });
    return null;
  } catch (err) {
    if (schemaRefused(err)) return err.message;
    throw err;
  }
}

/**
 * After a 400 of the converter: finds which of `tools` the server refuses, takes them out (in
 * place) with a warning, and returns how many. 0: no tool alone is refused (the 400 was
 * something else, or the server refuses the same body without tools). At most one probe without
 * tools, then about two per refused tool per halving of the list; for a grammar that could not
 * be parsed, which /apply-template never parses, one `/completion` probe per tool after that.
 */
export async function dropRefusedTools(
  endpoint: LlamaEndpoint,
  /** The server's one start (a lease's `launch`): what it refused is kept for its life. */
  server: object,
  tools: unknown[],
  extra: Record<string, unknown>,
  warnings: Warning[],
  signal: AbortSignal,
  /** The refused request's error message, and the slot the turn holds (grammar probes use it). */
  refusal: { why: string; slot?: number } = { why: "" },
): Promise<number> {
  const { why, slot } = refusal;
  const refused = refusedBy.get(server) ?? new Map<string, string>();
  refusedBy.set(server, refused);
  const found = new Map<string, string>();
  // /apply-template runs nothing (~20 ms).
  const probe = (set: unknown[]): Promise<string | null> =>
    refusalOf(
      endpoint,
      "/apply-template",
      { ...extra, messages: [{ role: "user", content: "." }], ...(set.length > 0 ? { tools: set } : {}) },
      signal,
    );
  const search = async (set: unknown[]): Promise<void> => {
    const reason = await probe(set);
    if (reason === null) return;
    if (set.length === 1) return void found.set(keyOf(set[0]), reason);
    const half = Math.ceil(set.length / 2);
    await search(set.slice(0, half));
    await search(set.slice(half));
  };
  // The converter runs for every request (common/chat.cpp): refused without tools too, the 400
  // is not theirs, and blaming each would keep them all out of the server's later turns.
  if ((await probe([])) !== null) return 0;
  await search([...tools]);
  // A grammar the parser refuses is found only where one is parsed (95f): /apply-template took
  // the body, so each tool's schema is tried alone as a prediction's grammar, nothing predicted.
  if (found.size === 0 && GRAMMAR_PARSE.test(why)) {
    for (const tool of tools) {
      const reason = await grammarProbe(endpoint, tool, slot, signal);
      if (reason !== null) found.set(keyOf(tool), reason);
    }
  }
  const before = tools.length;
  dropWith((k) => found.get(k) ?? refused.get(k), tools, warnings);
  // Kept for the server's life, so at most REFUSALS_KEPT (the latest; one forgotten is probed
  // again if offered), each reason as the warning quotes it: the real one quotes the whole schema,
  // and tool lists that change (a server restarted with new schemas) grew it without bound.
  for (const [key, reason] of found)
    keepLatest(refused, key, cutText(reason.split("\n").pop() ?? "", REASON_CHARS), REFUSALS_KEPT);
  return before - tools.length;
}
