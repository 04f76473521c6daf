import { z } from "zod";
import { schemaProblem } from "./schema-problem.ts";

export { MAX_NAME_RUN_BYTES } from "./schema-names.ts";
/**
 * `response_format`'s params. What the schema alone can refuse is judged in `schema-problem.ts`,
 * zod-free, which the validator's thread also loads.
 */
export {
  type CheckedSchema,
  checkedSchema,
  MAX_LOOP_PATTERN_CHARS,
  MAX_SCHEMA_BRANCHES,
  MAX_SCHEMA_CHARS,
  MAX_SCHEMA_DEPTH,
  MAX_SCHEMA_OBJECTS,
  MAX_SCHEMA_PATTERNS,
  patternsLeftToCompile,
  schemaProblem,
} from "./schema-problem.ts";

const JsonSchemaObject = z.record(z.string(), z.unknown()).superRefine((schema, ctx) => {
  const problem = schemaProblem(schema);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

/**
 * Strict wrappers (the JSON Schema inside stays open): llama-server's own API reads `schema` beside
 * `json_object`, so a stripped key let such an answer through unconstrained by what the host asked.
 */
export const ResponseFormatSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({
      type: z.literal("json_schema"),
      /** The JSON Schema the answer must match. */
      schema: JsonSchemaObject,
      /** A name for the schema, passed on to llama-server. */
      name: z.string().min(1).max(64).optional(),
    }),
    /** Any JSON object. */
    z.strictObject({ type: z.literal("json_object") }),
  ],
  {
    error: (issue) =>
      issue.code === "invalid_union"
        ? 'expected {type: "json_schema", schema, name?} or {type: "json_object"}'
        : undefined,
  },
);
export type ResponseFormat = z.infer<typeof ResponseFormatSchema>;
