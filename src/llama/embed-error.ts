/**
 * How an embedding request failed, beyond the request's own failures (`LlmError`), so `embed`
 * can answer `invalid_request` naming what to change (docs/plan.md, "Embedding models"):
 * `too_long`, one input has more tokens than the server takes in one batch or one slot
 * (recording 114: refused, never truncated; `data.index` names it); `empty_input`, no inputs at
 * all (115: llama-server's own answer is a 500, so it is never sent); `not_supported`, the
 * server was started without `--embeddings` (110: 501); `not_finite`, the model gave an input a
 * vector holding NaN or infinity (`data.index` names it: the model cannot embed that text);
 * `too_many`, more inputs than one answer carries at the model's width (`embedMaxInputs`);
 * `crashes_server`, one input crashed the server each of the last times it was sent alone
 * (`data.index` names it: server/embed-suspects.ts), so it is not sent again.
 */
export type EmbedErrorKind =
  | "too_long"
  | "empty_input"
  | "not_supported"
  | "not_finite"
  | "too_many"
  | "crashes_server";

export interface EmbedErrorData {
  /** The input's place in the caller's list. */
  index?: number;
  /** Its tokens, and the most the server takes (its batch, or its slot's context). */
  n_tokens?: number;
  max_tokens?: number;
  /** `too_many`: the most inputs one request may hold at the model's width, and that width. */
  max_inputs?: number;
  dimensions?: number;
}

export class EmbedError extends Error {
  constructor(
    readonly kind: EmbedErrorKind,
    message: string,
    readonly data: EmbedErrorData = {},
  ) {
    super(message);
    this.name = "EmbedError";
  }
}
