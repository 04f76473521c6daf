import type AjvClass from "ajv";
import type { ValidateFunction } from "ajv";
import { linearRegExp } from "../util/linear-regexp.ts";

/**
 * JSON Schema validation of a chat's structured answer (docs/agent.md#thinking-and-structured-output), with
 * Ajv: the MCP SDK the core already ships validates tool schemas with it, so the compiled binary carries it anyway
 * and a second validator would only add size (docs/performance.md). Loaded on the first chat
 * that asks for `response_format`, never at start-up, and only in the validator's worker
 * (`validator-worker.ts`): what a hostile schema or answer costs never stops the core's loop.
 * Patterns and the formats' regexes run on RE2 (`util/linear-regexp.ts`), in linear time.
 */

/** One problem with the answer: where (a JSON pointer into it, "" for the whole) and what. */
export interface AnswerError {
  path: string;
  message: string;
}

export type Validate = (value: unknown) => AnswerError[];

/**
 * How many of an answer's errors `output_invalid` lists (`errors_total` counts them all), and so
 * how many the validator's thread hands back: an answer of many failing items is as many errors.
 */
export const SHOWN_ANSWER_ERRORS = 20;

/** Compiled schemas kept by their JSON text: a host usually asks for the same few again and again. */
const KEPT = 32;
const compiled = new Map<string, { schema: object; validate: ValidateFunction }>();
/**
 * Compiles an instance makes before a fresh one takes over. Ajv keeps something of every schema
 * it compiled for the instance's life, `removeSchema` or not: the values its generated code
 * refers to (the schema, the validator, each pattern) and a refused schema's cache entry. A
 * host naming ever new schemas grew the validator's thread without bound.
 */
const COMPILES_PER_INSTANCE = 256;
let compiles = 0;
let ajv: AjvClass | undefined;

function instance(): AjvClass {
  if (ajv) return ajv;
  const { default: Ajv } = require("ajv") as typeof import("ajv");
  const { default: addFormats } = require("ajv-formats") as typeof import("ajv-formats");
  // strict off: a schema written for another validator (or for llama-server's grammar) may
  // carry keywords Ajv does not know, which only describe. addUsedSchema off: two hosts' schemas
  // with the same $id do not collide in one instance. validateSchema off: checking a schema
  // against the meta-schema costs a cold chat 50–90 ms, and compiling refuses a keyword of the
  // wrong type anyway ("required value must be array"). No logger: stdout is the protocol's.
  ajv = new Ajv({
    strict: false,
    allErrors: true,
    addUsedSchema: false,
    validateSchema: false,
    logger: false,
    code: { regExp: Object.assign(linearRegExp, { code: "linearRegExp" }) },
  });
  addFormats(ajv);
  linearFormats(ajv);
  return ajv;
}

/**
 * What the Ajv instance now in use holds for the schemas it compiled: its cache's entries and the
 * values its generated code refers to (each schema, validator, pattern). Tests count it.
 */
export function ajvHeld(): number {
  const inner = ajv as unknown as {
    _cache: Map<unknown, unknown>;
    scope: { _values: Record<string, Set<unknown>> };
  };
  if (!inner) return 0;
  return inner._cache.size + Object.values(inner.scope._values).reduce((n, v) => n + v.size, 0);
}

/**
 * ajv-formats' regexes moved to RE2 where RE2 takes them (`url` alone costs seconds on 20 KB
 * of `::` in a backtracking engine). The three it cannot take (lookahead: `duration`,
 * `hostname`, `url`) stay native, bounded by the worker's time limit.
 */
function linearFormats(instance: AjvClass): void {
  for (const [name, format] of Object.entries(instance.formats)) {
    const rx = format instanceof RegExp ? format : undefined;
    if (!rx) continue;
    try {
      const linear = linearRegExp(rx.source, rx.flags);
      instance.addFormat(name, { type: "string", validate: (s: string) => linear.test(s) });
    } catch {
      // Lookaround: left as it is.
    }
  }
}

/**
 * Ajv resolves `"$ref": "#"` through the schema's own id; with `addUsedSchema` off a schema
 * without one cannot refer to itself, so the compiled copy gets one (docs/protocol.md: recursion
 * through properties or items works).
 */
const SELF_ID = "https://local-ai.invalid/response_format";

/**
 * A validator for `schema`; throws what Ajv says of a schema it cannot compile (a dangling
 * `$ref`, an unknown draft). The caller has ruled out sizes and `$ref` cycles
 * (protocol/response-format.ts).
 */
export function compileSchema(schema: Record<string, unknown>): Validate {
  const key = JSON.stringify(schema);
  let entry = compiled.get(key);
  if (entry) {
    compiled.delete(key);
  } else {
    if (compiles >= COMPILES_PER_INSTANCE) {
      // The kept validators are the old instance's: they go with it, compiled again when asked.
      ajv = undefined;
      compiles = 0;
      compiled.clear();
    }
    compiles += 1;
    const copy = JSON.parse(key) as Record<string, unknown>;
    if (copy.$id === undefined) copy.$id = SELF_ID;
    entry = { schema: copy, validate: instance().compile(copy) };
    if (compiled.size >= KEPT) {
      const [oldest, old] = compiled.entries().next().value as [string, { schema: object }];
      compiled.delete(oldest);
      // Ajv keeps every compiled schema by identity: let the evicted one go.
      ajv?.removeSchema(old.schema);
    }
  }
  compiled.set(key, entry);
  const validate = entry.validate;
  return (value) => {
    if (validate(value)) return [];
    return (validate.errors ?? []).map((e) => ({ path: e.instancePath, message: e.message ?? e.keyword }));
  };
}
