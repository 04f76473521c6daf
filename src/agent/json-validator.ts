import type AjvClass from "ajv";
import type { ValidateFunction } from "ajv";

/**
 * JSON Schema validation of a chat's structured answer
 * (docs/agent.md#thinking-and-structured-output), with Ajv: the MCP SDK the core already ships
 * validates tool schemas with it, so the compiled binary carries it anyway and a second validator
 * would only add size (docs/performance.md). Loaded on the first chat that asks for
 * `response_format`, never at start-up.
 */

/** One problem with the answer: where (a JSON pointer into it, "" for the whole) and what. */
export interface AnswerError {
  path: string;
  message: string;
}

export type Validate = (value: unknown) => AnswerError[];

/** Compiled schemas kept by their JSON text: a host usually asks for the same few again and again. */
const KEPT = 32;
const compiled = new Map<string, { schema: object; validate: ValidateFunction }>();
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
  });
  addFormats(ajv);
  return ajv;
}

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
    const copy = JSON.parse(key) as Record<string, unknown>;
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
