import { CoreError } from "../protocol/errors.ts";

/**
 * The ways a document is refused, each `invalid_request` (docs/agent.md "Documents"): a format
 * not read at all carries `data.reason: "unsupported_format"` (docs/agent.md "Documents"); the others say in
 * `data.problem` what is wrong with a document of a format that is read.
 */
export type DocumentProblem = "too_large" | "encrypted" | "no_text" | "damaged" | "unreadable";

export function unsupportedFormat(what: string): CoreError {
  return new CoreError(
    "invalid_request",
    `${what}: not a format documents.add reads (plain text, Markdown, HTML, PDF)`,
    { reason: "unsupported_format" },
  );
}

/** `field`: the param at fault when it is the file `path` names, as an image's refusal names its own. */
export function documentProblem(problem: DocumentProblem, message: string, field?: "path"): CoreError {
  return new CoreError("invalid_request", message, field ? { field, problem } : { problem });
}

export function tooMuchText(chars: number, max: number): CoreError {
  return documentProblem("too_large", `the document's text is over ${max} characters (${chars} so far)`);
}
