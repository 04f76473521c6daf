import type { z } from "zod";
import { firstStringPath } from "../util/string-path.ts";
import { cutText } from "../util/text-cut.ts";
import { CoreError } from "./errors.ts";

/**
 * A request's params parsed by its method's schema, or `invalid_request` naming the failing field
 * (docs/protocol.md "Errors"). Text must also be text: a string with a lone UTF-16 surrogate (`"\ud800"`, valid JSON)
 * is refused here, naming the field, before anything is stored or sent (llama-server refuses such
 * a body whole, docs/protocol.md "Text").
 */
export function checkedParams(schema: z.ZodType, params: object): unknown {
  // Without zod's compiled fast path: a method's first request (a cold chat's, on its way to the
  // spawn) paid its compile, ~1.5 ms of the chat's, for some 5 µs saved a later parse
  // (bench/first-parse.ts).
  const parsed = schema.safeParse(params, { jitless: true });
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    const issue = first ? unknownKey(first) : undefined;
    const named = issue ? unionBranchIssue(issue) : undefined;
    const shown = named ?? issue;
    throw new CoreError("invalid_request", describeIssue(shown), {
      field: shown && shown.path.length > 0 ? shownPath(shown.path) : null,
    });
  }
  const bad = loneSurrogatePath(parsed.data);
  if (bad) {
    const field = shownPath(bad);
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

/**
 * A key a strict object does not know, named as a field of its own (`params.userId`), not the
 * object holding it: zod puts its issue at the object's path and lists the keys.
 */
function unknownKey(issue: Issue): Issue {
  const key = issue.code === "unrecognized_keys" ? issue.keys?.[0] : undefined;
  if (key === undefined) return issue;
  return { ...issue, path: [...issue.path, key], message: "unknown key" };
}

/**
 * A field's path as an error names it. Its keys may be the host's (an unknown key, a JSON Schema's
 * property names): each is cut and escaped as JSON escapes it, so the message stays one line of
 * text, and a lone surrogate in a key is named as `\ud800`, not carried back raw in the answer
 * that refuses it (a strict host's parser, serde_json's, cannot read that line at all). The empty
 * key keeps its quotes: bare, the field was "" (read as none) and the message `params.`.
 */
function shownPath(path: readonly PropertyKey[]): string {
  return path.map((key) => (typeof key === "number" ? String(key) : shownKey(String(key)))).join(".");
}
function shownKey(key: string): string {
  return key === "" ? '""' : JSON.stringify(cutText(key, SHOWN_KEY_CHARS)).slice(1, -1);
}
const SHOWN_KEY_CHARS = 80;

/** What zod says of a union without a message of the schema's own (those are kept). */
const ZOD_UNION_MESSAGE = "Invalid input";

/** The shape of an issue this file reads: zod's, with an `invalid_union`'s branches. */
interface Issue {
  code: string;
  path: PropertyKey[];
  message: string;
  expected?: string;
  errors?: Issue[][];
  keys?: string[];
}

function describeIssue(issue: Issue | undefined): string {
  if (!issue) return "invalid params";
  const field = issue.path.length ? `params.${shownPath(issue.path)}` : "params";
  // zod says "Invalid input: expected string, received undefined" of a field left out.
  if (issue.code === "invalid_type" && /received undefined$/.test(issue.message))
    return `${field}: required (${issue.expected})`;
  if (issue.code === "invalid_union") return `${field}: ${unionMessage(issue)}`;
  return `${field}: ${issue.message}`;
}

/**
 * zod words a value no branch of a union takes as "Invalid input", whatever it was: the branches'
 * types are named instead (`expected string or array, received number`).
 */
function unionMessage(issue: Issue): string {
  const firsts = (issue.errors ?? []).map((branch) => branch[0]);
  const byType = firsts.every((i) => i?.code === "invalid_type" && i.path.length === 0);
  if (!byType || firsts.length === 0 || issue.message !== ZOD_UNION_MESSAGE) return issue.message;
  const expected = [...new Set(firsts.map((i) => i?.expected))].join(" or ");
  const received = /received (\w+)$/.exec(firsts[0]?.message ?? "")?.[1];
  if (received === "undefined") return `required (${expected})`;
  return received ? `expected ${expected}, received ${received}` : `expected ${expected}`;
}

/**
 * A union whose value has one branch's type but fails inside it (a list holding a number where
 * strings belong): that branch's own issue, at its full path (`input.0`), rather than the union.
 */
function unionBranchIssue(issue: Issue): Issue | undefined {
  if (issue.code !== "invalid_union" || issue.message !== ZOD_UNION_MESSAGE) return undefined;
  const inside = (issue.errors ?? []).filter((b) => b[0] && b[0].path.length > 0);
  const only = inside.length === 1 ? inside[0]?.[0] : undefined;
  return only ? { ...only, path: [...issue.path, ...only.path] } : undefined;
}
