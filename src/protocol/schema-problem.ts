import { linearRegExpProblem } from "../util/linear-regexp.ts";

/**
 * `response_format` (docs/agent.md#thinking-and-structured-output): the chat's answer constrained
 * to JSON (llama-server's grammar) and validated by the core. What the params alone can refuse is
 * refused here, before a turn starts: a schema that is not an object, one too big or too deep for a
 * grammar, and a `$ref` cycle that never reaches a value (it would recurse without end, in
 * llama-server's converter and in any validator). What only llama-server can judge comes back as
 * its 400 (test/fixtures/llama-server/transcripts/95d).
 */

/** Longest schema taken, as JSON text: a grammar grows with it, and every step's request carries it. */
export const MAX_SCHEMA_CHARS = 256 * 1024;
/** Deepest nesting of the schema's JSON taken (llama-server converts it recursively). */
export const MAX_SCHEMA_DEPTH = 64;

/**
 * Most objects (subschemas and the like) a schema may hold: Ajv's compile grows faster than the
 * schema (an `anyOf` nests its generated code once per branch), so these bound what the
 * validator's thread may be asked to compile (docs/protocol.md, Structured output).
 */
export const MAX_SCHEMA_OBJECTS = 2000;
/** Most branches of one `anyOf`, `oneOf` or `allOf`. */
export const MAX_SCHEMA_BRANCHES = 128;
/** Most regular expressions (`pattern` values and `patternProperties` keys) in one schema. */
export const MAX_SCHEMA_PATTERNS = 256;
/**
 * Most characters of a schema's patterns, all together, whose syntax the params check reads on
 * the core's loop: RE2's parse costs microseconds a character (a Unicode class such as
 * `\p{L}` far more), and a schema's worth of patterns held the loop most of a second, ping and
 * cancel with it. Past this the patterns are left to the validator's compile on its thread,
 * before the request (`patternsLeftToCompile`).
 */
export const MAX_LOOP_PATTERN_CHARS = 1024;

/** Keywords whose subschemas apply to the value itself, not to a part of it. */
const IN_PLACE = ["allOf", "anyOf", "oneOf"] as const;
const IN_PLACE_ONE = ["not", "if", "then", "else"] as const;

type Node = Record<string, unknown>;
const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && !Array.isArray(v);

/** Why a JSON Schema cannot be used, or undefined when it can. */
export function schemaProblem(schema: Node): string | undefined {
  const walked = walk(schema);
  if (typeof walked === "string") return walked;
  const refused = patternsProblem(walked.patterns);
  if (refused) return refused;
  const cycle = inPlaceCycle(walked.pointers, walked.schemas);
  return cycle
    ? `a $ref cycle that never reaches a value (${cycle.join(" → ")}); a recursive schema must go through properties or items`
    : undefined;
}

/**
 * A `$ref` cycle that never reaches a value, as the pointers along it, in a schema the params
 * have not walked (an MCP tool's input schema, bounded by its size where it is listed): llama-server
 * converts a tool's schema for every request that offers it, and such a cycle crashed it.
 */
export function refCycle(schema: Node): string[] | undefined {
  const { pointers, places } = nodesOf(schema) as Nodes;
  return inPlaceCycle(pointers, schemaNodes(schema, places));
}

/** A property name or `$ref` in such a schema that llama-server's converter cannot take (`nameRunProblem`), or undefined. */
export function longNameRun(schema: Node): string | undefined {
  const { pointers, places } = nodesOf(schema) as Nodes;
  for (const node of schemaNodes(schema, places).keys()) {
    const problem = nameRunProblem(node, pointers.get(node) ?? "#");
    if (problem) return problem;
  }
  return undefined;
}

type Nodes = { pointers: Map<Node, string>; places: Map<Node, Place> };

/**
 * Every object in the schema, with its pointer and place, or which bound it is past (it stops
 * there: a schema's worth of `{}`s is 60,000). Iterative: a hostile document may nest deep.
 */
function nodesOf(
  schema: Node,
  maxDepth = Number.POSITIVE_INFINITY,
  maxObjects = Number.POSITIVE_INFINITY,
): Nodes | "deep" | "many" {
  const pointers = new Map<Node, string>();
  const places = new Map<Node, Place>();
  const pending: [unknown, string, number, Place][] = [[schema, "#", 0, "schema"]];
  for (let item = pending.pop(); item; item = pending.pop()) {
    const [value, pointer, depth, place] = item;
    if (typeof value !== "object" || value === null) continue;
    if (depth > maxDepth) return "deep";
    if (isNode(value)) {
      pointers.set(value, pointer);
      places.set(value, place);
    }
    if (pointers.size > maxObjects) return "many";
    for (const [key, child] of Object.entries(value))
      pending.push([child, `${pointer}/${escapePointer(key)}`, depth + 1, placeOf(value, place, key)]);
  }
  return { pointers, places };
}

/**
 * The objects read as schemas, each with its `$ref`'s targets: those not inside data, and what a
 * schema's `$ref` names wherever it is (inside `default` say), with the schemas it holds. A `$ref`
 * written inside data is data: llama-server's converter dumps enum and const values, skips
 * default and examples, and follows none there, nor does the validator, so such a `$ref` makes
 * no cycle and its names no rules.
 */
function schemaNodes(root: Node, places: Map<Node, Place>): Map<Node, Node[]> {
  const schemas = new Map<Node, Node[]>();
  for (const [node, place] of places) if (place !== "data") schemas.set(node, []);
  for (const [node, targets] of schemas) {
    // A Map's iteration takes in what is added as it goes: the targets' schemas are read too.
    if (typeof node.$ref !== "string") continue;
    targets.push(...refTargets(root, node.$ref));
    for (const target of targets) addSchemas(target, schemas);
  }
  return schemas;
}

/**
 * `target` and the schemas it holds, read as a schema, into `schemas`. Neither data (a `$ref` into
 * it walks it on its own) nor what is there already (its schemas are too) is walked again: each
 * object is walked once, where a walk per `$ref` into nested values held the loop tens of ms.
 */
function addSchemas(target: Node, schemas: Map<Node, Node[]>): void {
  const pending: [unknown, Place][] = [[target, "schema"]];
  for (let item = pending.pop(); item; item = pending.pop()) {
    const [value, place] = item;
    if (place === "data" || typeof value !== "object" || value === null) continue;
    if (isNode(value)) {
      if (schemas.has(value)) continue;
      schemas.set(value, []);
    }
    for (const [key, child] of Object.entries(value)) pending.push([child, placeOf(value, place, key)]);
  }
}

/**
 * Most bytes (UTF-8) in a row outside `A-Z a-z 0-9 -` a property name or `$ref` may hold.
 * llama-server's converter makes grammar rule names of them with std::regex `[^a-zA-Z0-9-]+`,
 * whose matcher recurses once per byte of such a run: about 1,700 bytes overflowed a 512 KiB
 * thread stack (macOS gives its HTTP threads no more), about 25,000 an 8 MiB one, and the server
 * crashed (common/json-schema-to-grammar.cpp `_add_rule`, `_resolve_ref`).
 */
export const MAX_NAME_RUN_BYTES = 256;

/** A property name or `$ref` of `node` past MAX_NAME_RUN_BYTES, named by its place, or undefined. */
function nameRunProblem(node: Node, pointer: string): string | undefined {
  const why = `bytes in a row outside A-Z, a-z, 0-9 and -; at most ${MAX_NAME_RUN_BYTES} are taken (llama-server's converter crashes on more)`;
  const refRun = typeof node.$ref === "string" ? longestRun(node.$ref) : 0;
  if (refRun > MAX_NAME_RUN_BYTES) return `the $ref at ${pointer} has ${refRun} ${why}`;
  if (!isNode(node.properties)) return undefined;
  for (const name of Object.keys(node.properties)) {
    const run = longestRun(name);
    if (run > MAX_NAME_RUN_BYTES) return `a property name at ${pointer}/properties has ${run} ${why}`;
  }
  return undefined;
}

/**
 * The longest run of UTF-8 bytes outside `A-Za-z0-9-` in `text`, in one pass over its code
 * units: a schema's worth of names split into runs (and a Buffer per run) held the loop tens of
 * milliseconds. A surrogate pair is 4 bytes, a lone surrogate 3 (UTF-8 writes U+FFFD for it).
 */
function longestRun(text: string): number {
  let longest = 0;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x2d) {
      run = 0;
      continue;
    }
    const pair = c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
    if (pair) i++;
    run += pair ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (run > longest) longest = run;
  }
  return longest;
}

/**
 * Whether the schema's patterns are too long together for the params check to read their
 * syntax on the loop (MAX_LOOP_PATTERN_CHARS): the validator's compile, off the loop, must
 * then answer before the chat's request, refusing one RE2 cannot take.
 */
export function patternsLeftToCompile(schema: Node): boolean {
  const walked = walk(schema);
  return typeof walked !== "string" && patternChars(walked.patterns) > MAX_LOOP_PATTERN_CHARS;
}

const patternChars = (patterns: [string, string][]) => patterns.reduce((n, [p]) => n + p.length, 0);

/** The schema's objects (with their pointers), those read as schemas, and patterns, or why its size or shape is refused. */
function walk(
  schema: Node,
): string | { pointers: Map<Node, string>; schemas: Map<Node, Node[]>; patterns: [string, string][] } {
  let text: string;
  try {
    text = JSON.stringify(schema);
  } catch {
    // JSON.stringify recurses: nesting past the stack (~100,000 levels) throws, far past the bound.
    return `the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`;
  }
  if (text.length > MAX_SCHEMA_CHARS)
    return `the schema is ${text.length} characters of JSON; at most ${MAX_SCHEMA_CHARS} are taken`;
  const nodes = nodesOf(schema, MAX_SCHEMA_DEPTH, MAX_SCHEMA_OBJECTS);
  if (nodes === "deep") return `the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`;
  if (nodes === "many") return `the schema holds more than ${MAX_SCHEMA_OBJECTS} objects`;
  const { pointers, places } = nodes;
  const schemas = schemaNodes(schema, places);
  const patterns: [string, string][] = [];
  for (const node of schemas.keys()) {
    const problem = keywordProblem(node, pointers.get(node) ?? "#", patterns);
    if (problem) return problem;
  }
  return { pointers, schemas, patterns };
}

/** Keywords whose values are data, not schemas. */
const DATA = new Set(["enum", "const", "default", "examples"]);
/** Keywords whose values map names the schema's author chose to schemas: such a name is no keyword. */
const NAMES = new Set(["properties", "patternProperties", "$defs", "definitions", "dependencies"]);

/**
 * Where a value sits: in a schema's place, a map of `NAMES`, or inside data (enum, const,
 * default, examples), where a key spelt as a keyword is only data. A property named `enum` is a
 * schema all the same, which llama-server's converter and the validator read.
 */
type Place = "schema" | "names" | "data";
function placeOf(parent: object, place: Place, key: string): Place {
  if (Array.isArray(parent) || place === "data") return place;
  if (place === "names") return "schema";
  return DATA.has(key) ? "data" : NAMES.has(key) ? "names" : "schema";
}

/** Too many branches in a node, or its patterns (collected into `patterns` with where they are). */
function keywordProblem(node: Node, pointer: string, patterns: [string, string][]): string | undefined {
  for (const key of IN_PLACE) {
    const list = node[key];
    if (Array.isArray(list) && list.length > MAX_SCHEMA_BRANCHES)
      return `${pointer}/${key} has ${list.length} branches; at most ${MAX_SCHEMA_BRANCHES} are taken`;
  }
  const named = nameRunProblem(node, pointer);
  if (named) return named;
  if (typeof node.pattern === "string") patterns.push([node.pattern, `${pointer}/pattern`]);
  if (isNode(node.patternProperties))
    for (const key of Object.keys(node.patternProperties))
      patterns.push([key, `${pointer}/patternProperties/${escapePointer(key)}`]);
  return undefined;
}

/**
 * Patterns are matched by RE2, in linear time (`util/linear-regexp.ts`): one RE2 cannot
 * compile (lookaround, a backreference) is refused here, naming it, while they are short
 * enough to read on the loop; longer ones are the validator's compile's to refuse.
 */
function patternsProblem(patterns: [string, string][]): string | undefined {
  if (patterns.length > MAX_SCHEMA_PATTERNS)
    return `the schema has ${patterns.length} patterns; at most ${MAX_SCHEMA_PATTERNS} are taken`;
  if (patternChars(patterns) > MAX_LOOP_PATTERN_CHARS) return undefined;
  return firstRefusedPattern(patterns);
}

function firstRefusedPattern(patterns: [string, string][]): string | undefined {
  for (const [pattern, pointer] of patterns) {
    const problem = linearRegExpProblem(pattern);
    if (problem)
      return `the pattern at ${pointer} cannot be matched in linear time (RE2: ${problem}); lookaround and backreferences are not taken`;
  }
  return undefined;
}

/**
 * The validator's thread, when its compile refuses a schema whose patterns were too long to read
 * on the loop: the pattern RE2 refuses, named by its place as the params check names a short
 * one (Ajv's message named neither the place nor the rule), or undefined for another refusal.
 */
export function placedPatternProblem(schema: Node): string | undefined {
  const walked = walk(schema);
  return typeof walked === "string" ? undefined : firstRefusedPattern(walked.patterns);
}

/** The subschemas a node applies to the value itself: its `$ref` targets (`schemaNodes`), allOf/anyOf/oneOf, not, if/then/else. */
function inPlaceEdges(node: Node, schemas: Map<Node, Node[]>): Node[] {
  const out: Node[] = [...(schemas.get(node) ?? [])];
  for (const key of IN_PLACE) {
    const list = node[key];
    if (Array.isArray(list)) for (const s of list) if (isNode(s)) out.push(s);
  }
  for (const key of IN_PLACE_ONE) if (isNode(node[key])) out.push(node[key] as Node);
  return out;
}

/** A cycle of in-place edges, as the pointers along it; undefined when there is none. */
function inPlaceCycle(pointers: Map<Node, string>, schemas: Map<Node, Node[]>): string[] | undefined {
  const state = new Map<Node, "open" | "done">();
  for (const start of schemas.keys()) {
    if (state.has(start)) continue;
    const path: Node[] = [];
    const stack: { node: Node; edges: Node[]; next: number }[] = [];
    const enter = (node: Node) => {
      state.set(node, "open");
      path.push(node);
      stack.push({ node, edges: inPlaceEdges(node, schemas), next: 0 });
    };
    enter(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as (typeof stack)[number];
      const edge = top.edges[top.next++];
      if (!edge) {
        state.set(top.node, "done");
        stack.pop();
        path.pop();
        continue;
      }
      const seen = state.get(edge);
      if (seen === "open") {
        const loop = [...path.slice(path.indexOf(edge)), edge];
        return loop.map((n) => pointers.get(n) ?? "?");
      }
      if (seen === undefined) enter(edge);
    }
  }
  return undefined;
}

/**
 * What a `$ref` names in the document, as a validator reads it and as llama-server does: the two
 * differ, and a cycle either one follows is one. Only llama-server's cannot see `#/$defs/a~1b` as
 * a cycle through `a~1b`, `%41` as one through `%41`, or `#/allOf/0x` as `allOf[0]`, which its
 * converter followed without end (a crash: common/json-schema-to-grammar.cpp, allOf's components).
 */
function refTargets(root: Node, ref: string): Node[] {
  const read = resolveLocal(root, ref);
  const llama = resolveAsLlama(root, ref);
  return [read, llama].filter((n, i, all): n is Node => n !== undefined && all.indexOf(n) === i);
}

/**
 * A `#/` pointer's target as llama-server's converter finds it (resolve_refs): each token between
 * slashes used as it is (no `~1`, `~0` or `%` escapes), an array's index read as C's `strtoull`
 * reads it (blanks, then a sign, then digits, the rest ignored: `" 0"`, `"+0"`, `"-0"`, `"0x"`).
 */
function resolveAsLlama(root: Node, ref: string): Node | undefined {
  if (!ref.startsWith("#/")) return undefined;
  let at: unknown = root;
  for (const token of ref.slice(2).split("/")) {
    if (isNode(at) && Object.hasOwn(at, token)) at = at[token];
    else if (Array.isArray(at)) {
      const index = strtoullIndex(token);
      if (index === undefined || index >= at.length) return undefined;
      at = at[index];
    } else return undefined;
  }
  return isNode(at) ? at : undefined;
}

/**
 * `token` as `strtoull` reads it, where that is an index at all: a minus sign negates modulo 2^64
 * (`-18446744073709551615` is 1); past 2^64 - 1 is out of range (std::stoull throws: refused).
 */
function strtoullIndex(token: string): number | undefined {
  const m = /^[\t\n\v\f\r ]*([+-]?)0*(\d+)/.exec(token);
  const magnitude = m && (m[2] as string).length <= 20 ? BigInt(m[2] as string) : 2n ** 64n;
  if (!m || magnitude >= 2n ** 64n) return undefined;
  const value = m[1] === "-" ? (2n ** 64n - magnitude) % 2n ** 64n : magnitude;
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : undefined;
}

/** A `#`-pointer's target in the document; undefined for other documents or a dangling pointer. */
function resolveLocal(root: Node, ref: string): Node | undefined {
  if (!ref.startsWith("#")) return undefined;
  let at: unknown = root;
  const body = ref.slice(1);
  if (body === "") return root;
  if (!body.startsWith("/")) return undefined;
  for (const raw of body.slice(1).split("/")) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    } catch {
      return undefined;
    }
    if (typeof at !== "object" || at === null || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return isNode(at) ? at : undefined;
}

function escapePointer(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}
