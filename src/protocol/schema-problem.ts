import { linearRegExpProblem } from "../util/linear-regexp.ts";
import { nameRunProblem, refTargets } from "./schema-names.ts";

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

/** What a walk of a schema the params took tells its turn: its JSON text, and `patternsLeftToCompile`. */
export interface CheckedSchema {
  text: string;
  leftToCompile: boolean;
}

/**
 * What the params check found of each schema it took, by the object the parsed params hold: the
 * turn reads it (`checkedSchema`). Walked again there, a schema at the bounds held the loop a
 * second time, 5-25 ms on a loaded 2-core machine, ping and cancel waiting.
 */
const checked = new WeakMap<Node, CheckedSchema>();

/** Why a JSON Schema cannot be used, or undefined when it can. */
export function schemaProblem(schema: Node): string | undefined {
  const walked = walk(schema);
  if (typeof walked === "string") return walked;
  const refused = patternsProblem(walked.patterns);
  if (refused) return refused;
  const cycle = inPlaceCycle(walked.pointers, walked.schemas);
  if (cycle)
    return `a $ref cycle that never reaches a value (${cycle.join(" → ")}); a recursive schema must go through properties or items`;
  checked.set(schema, {
    text: walked.text,
    leftToCompile: patternChars(walked.patterns) > MAX_LOOP_PATTERN_CHARS,
  });
  return undefined;
}

/**
 * A schema's JSON text and whether its patterns are left to the validator's compile: what the
 * params check found when it took this object, else a walk now (a schema it never saw).
 */
export function checkedSchema(schema: Node): CheckedSchema {
  const known = checked.get(schema);
  if (known) return known;
  const walked = walk(schema);
  if (typeof walked === "string") return { text: JSON.stringify(schema), leftToCompile: false };
  return { text: walked.text, leftToCompile: patternChars(walked.patterns) > MAX_LOOP_PATTERN_CHARS };
}

/**
 * What llama-server's converter cannot take in a schema the params have not walked (an MCP tool's
 * input schema, bounded by its size where it is listed, tool-list.ts): a `$ref` cycle that never
 * reaches a value, then a property name or `$ref` past MAX_NAME_RUN_BYTES (`nameRunProblem`).
 * It converts a tool's schema for every request that offers it, and either crashed it. One walk
 * serves both: a walk each held the loop twice as long.
 */
export function toolSchemaProblem(schema: Node): "cycle" | "run" | undefined {
  const { pointers, places } = nodesOf(schema) as Nodes;
  const schemas = schemaNodes(schema, places);
  if (inPlaceCycle(pointers, schemas)) return "cycle";
  for (const node of schemas.keys()) if (nameRunProblem(node, "#")) return "run";
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
    for (const [key, child] of childObjects(value))
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
    for (const [key, child] of childObjects(value)) pending.push([child, placeOf(value, place, key)]);
  }
}

/**
 * The objects and arrays `value` holds, with their keys: a string or number holds no schema, and
 * a pointer (and an entry) made for each of an enum's 100,000 numbers held the loop 50-100 ms.
 */
function childObjects(value: object): [string, object][] {
  const out: [string, object][] = [];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const child: unknown = value[i];
      if (typeof child === "object" && child !== null) out.push([String(i), child]);
    }
  } else
    for (const [key, child] of Object.entries(value))
      if (typeof child === "object" && child !== null) out.push([key, child]);
  return out;
}

/**
 * Whether the schema's patterns are too long together for the params check to read their
 * syntax on the loop (MAX_LOOP_PATTERN_CHARS): the validator's compile, off the loop, must
 * then answer before the chat's request, refusing one RE2 cannot take.
 */
export function patternsLeftToCompile(schema: Node): boolean {
  return checkedSchema(schema).leftToCompile;
}

const patternChars = (patterns: [string, string][]) => patterns.reduce((n, [p]) => n + p.length, 0);

/** The schema's objects (with their pointers), those read as schemas, and patterns, or why its size or shape is refused. */
function walk(
  schema: Node,
):
  | string
  | { text: string; pointers: Map<Node, string>; schemas: Map<Node, Node[]>; patterns: [string, string][] } {
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
  return { text, pointers, schemas, patterns };
}

/**
 * Keywords whose values are data, not schemas; OpenAPI's `example`, `discriminator` (Ajv's option
 * for it is off), `xml` and `externalDocs`, and its `x-` extensions, neither the validator's (an
 * unknown keyword: strict off) nor llama-server's converter's.
 */
const DATA = new Set([
  "enum",
  "const",
  "default",
  "examples",
  "example",
  "discriminator",
  "xml",
  "externalDocs",
]);
const isData = (key: string) => DATA.has(key) || key.startsWith("x-");
/** Keywords whose values map names the schema's author chose to schemas: such a name is no keyword. */
const NAMES = new Set(["properties", "patternProperties", "$defs", "definitions", "dependencies"]);

/**
 * Where a value sits: in a schema's place, a map of `NAMES`, or inside data (`DATA`), where a key
 * spelt as a keyword is only data. A property named `enum` is a schema all the same, which
 * llama-server's converter and the validator read.
 */
type Place = "schema" | "names" | "data";
function placeOf(parent: object, place: Place, key: string): Place {
  if (Array.isArray(parent) || place === "data") return place;
  if (place === "names") return "schema";
  return isData(key) ? "data" : NAMES.has(key) ? "names" : "schema";
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

function escapePointer(key: string): string {
  return key.replaceAll("~", "~0").replaceAll("/", "~1");
}
