import { CoreError } from "../protocol/errors.ts";

/**
 * Every refusal of a chat's image is `invalid_request` naming it as `images[i]` in `data.field`
 * (docs/protocol.md#images), with `data.reason` where a host may act on the kind.
 */
export type ImageRefusalReason =
  | "bad_base64"
  | "url"
  | "unsupported_format"
  | "damaged"
  | "too_large"
  | "too_many_pixels"
  | "too_many_images"
  | "unreadable";

export function imageRefused(index: number, reason: ImageRefusalReason, message: string): CoreError {
  const field = `images[${index}]`;
  return new CoreError("invalid_request", `params.${field}: ${message}`, { field, reason });
}
