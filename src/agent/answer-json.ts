import type { AnswerError } from "./json-validator.ts";

/**
 * A structured answer's text parsed as JSON, failing closed on what `JSON.parse` would let
 * through changed: a number beyond a double (`1e400`) parses to Infinity, which no schema's
 * `number` means and which the result's JSON would print as `null` (docs/agent.md, Thinking and
 * structured output).
 */
export type ParsedAnswer = { ok: true; value: unknown } | { ok: false; errors: AnswerError[] };

export function parseAnswer(text: string): ParsedAnswer {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    // Well-formed: the parser quotes the token it stopped at, half of it when that is an emoji,
    // and this goes to the host in output_invalid's message, which a strict parser then refuses.
    const why =
      text.trim() === ""
        ? "the answer is empty"
        : `not valid JSON (${(err as Error).message.toWellFormed()})`;
    return { ok: false, errors: [{ path: "", message: why }] };
  }
  const errors = nonFiniteNumbers(value);
  return errors.length === 0 ? { ok: true, value } : { ok: false, errors };
}

/** Where the value holds a number JSON cannot carry, as JSON pointers. Iterative: an answer may nest deep. */
function nonFiniteNumbers(root: unknown): AnswerError[] {
  const errors: AnswerError[] = [];
  const pending: [unknown, string][] = [[root, ""]];
  for (let item = pending.pop(); item; item = pending.pop()) {
    const [value, path] = item;
    if (typeof value === "number" && !Number.isFinite(value))
      errors.push({ path, message: "the number is too large for a double (it would be Infinity)" });
    else if (typeof value === "object" && value !== null)
      for (const [key, child] of Object.entries(value))
        pending.push([child, `${path}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`]);
  }
  return errors;
}
