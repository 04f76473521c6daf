import { CoreError } from "../protocol/errors.ts";

/**
 * Every refusal of a chat's image is `invalid_request` naming it as `images[i]` in `data.field`
 * (docs/protocol.md#images), with what is wrong in `data.problem` (as a document's refusal
 * says it) and, for a format the core does not send, `data.reason: "unsupported_format"`.
 */
export type ImageProblem =
  | "bad_base64"
  | "url"
  | "unsupported_format"
  | "damaged"
  | "too_large"
  | "too_many_pixels"
  | "too_many_images"
  | "unreadable";

export function imageRefused(index: number, problem: ImageProblem, message: string): CoreError {
  const field = `images[${index}]`;
  const reason = problem === "unsupported_format" ? { reason: problem } : {};
  return new CoreError("invalid_request", `params.${field}: ${message}`, { field, problem, ...reason });
}
