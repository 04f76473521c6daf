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

export function documentProblem(problem: DocumentProblem, message: string): CoreError {
  return new CoreError("invalid_request", message, { problem });
}

export function tooMuchText(chars: number, max: number): CoreError {
  return documentProblem("too_large", `the document's text is over ${max} characters (${chars} so far)`);
}
