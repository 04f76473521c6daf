import type { z } from "zod";
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
  // A stack, not recursion, and each node naming its parent, not a copy of its path: params may
  // nest as deep as the line allows.
  const stack: Node[] = [{ value, parent: undefined, key: "" }];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const v = top.value;
    if (typeof v === "string") {
      if (!v.isWellFormed()) return pathOf(top);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], parent: top, key: i });
    } else if (v !== null && typeof v === "object") {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, inner] = entries[i] as [string, unknown];
        if (!k.isWellFormed()) return [...pathOf(top), k];
        stack.push({ value: inner, parent: top, key: k });
      }
    }
  }
  return null;
}

interface Node {
  value: unknown;
  parent: Node | undefined;
  key: string | number;
}

function pathOf(node: Node): (string | number)[] {
  const path: (string | number)[] = [];
  for (let n: Node | undefined = node; n?.parent; n = n.parent) path.push(n.key);
  return path.reverse();
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
