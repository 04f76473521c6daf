import type { z } from "zod";
import { firstStringPath } from "../util/string-path.ts";
import { CoreError } from "./errors.ts";

/**
 * A request's params parsed by its method's schema, or `invalid_request` naming the failing field
 * (docs/protocol.md "Errors"). Text must also be text: a string with a lone UTF-16 surrogate (`"\ud800"`, valid JSON)
 * is refused here, naming the field, before anything is stored or sent (llama-server refuses such
 * a body whole, docs/protocol.md "Text").
 */
export function checkedParams(schema: z.ZodType, params: object): unknown {
  const parsed = schema.safeParse(params);
  if (!parsed.success) {
    throw new CoreError("invalid_request", describeParamsError(parsed.error), {
      field: parsed.error.issues[0]?.path.join(".") || null,
    });
  }
  const bad = loneSurrogatePath(parsed.data);
  if (bad) {
    const field = bad.join(".");
    throw new CoreError(
      "invalid_request",
      `params.${field}: has a lone UTF-16 surrogate, which is not text; send well-formed Unicode`,
      { field, reason: "not_well_formed" },
    );
  }
  return parsed.data;
}

/** The path to the first string (or key) in `value` that is not well-formed, else null. */
export function loneSurrogatePath(value: unknown): (string | number)[] | null {
  return firstStringPath(value, (text) => !text.isWellFormed(), { keys: true });
}

function describeParamsError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid params";
  const field = issue.path.length ? `params.${issue.path.join(".")}` : "params";
  // zod says "Invalid input: expected string, received undefined" of a field left out.
  if (issue.code === "invalid_type" && /received undefined$/.test(issue.message))
    return `${field}: required (${issue.expected})`;
  return `${field}: ${issue.message}`;
}
