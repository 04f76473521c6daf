import { CoreError } from "../../protocol/errors.ts";
import { checkedSchema, type ResponseFormat } from "../../protocol/response-format.ts";
import { abortable } from "../../util/abortable.ts";
import type { AnswerError } from "../json-validator.ts";
import { askValidator, type ValidatorAnswer } from "../validator-thread.ts";

/** What the answer of a `response_format` chat came to: its value, or why it does not count. */
export type AnswerCheck =
  | { ok: true; value: unknown }
  /** The first errors (json-validator.ts `SHOWN_ANSWER_ERRORS`) and how many there are. */
  | { ok: false; errors: AnswerError[]; total: number };

/** `json_object`: any object, as llama-server's grammar for it produces. */
const ANY_OBJECT = { type: "object" };

/**
 * How long the validator's thread may compile a schema, and check an answer (docs/agent.md):
 * the largest schema the params take compiled in 0.2–2 s on a loaded 2-core machine, an
 * ordinary answer checks in milliseconds; past these the schema is refused, the answer not taken.
 */
export const COMPILE_LIMIT_MS = 5000;
export const CHECK_LIMIT_MS = 1000;

/**
 * The chat's `response_format` (docs/agent.md#thinking-and-structured-output): how a constrained step asks llama-server for it,
 * and the check of the answer against the schema, which fails closed. Both run on the
 * validator's thread (`validator-thread.ts`), never on the core's loop; the schema is compiled
 * there from the turn's start (`prepare`), while memory is recalled and the model readied, and
 * its answer awaited before the first step (`refusal`).
 */
export class AnswerFormat {
  private compiled: Promise<ValidatorAnswer> | undefined;
  private readonly schema: string;

  constructor(readonly format: ResponseFormat) {
    // What the params check's walk found (protocol/schema-problem.ts): not walked again on the loop.
    this.schema =
      format.type === "json_schema" ? checkedSchema(format.schema).text : JSON.stringify(ANY_OBJECT);
  }

  /**
   * The request field, in llama-server's (OpenAI's) shape
   * (test/fixtures/llama-server/transcripts/95, 95c).
   */
  request(): Record<string, unknown> {
    const f = this.format;
    if (f.type === "json_object") return { type: "json_object" };
    return { type: "json_schema", json_schema: { ...(f.name ? { name: f.name } : {}), schema: f.schema } };
  }

  /** Begins compiling the validator (once), on its thread. */
  prepare(): void {
    this.compiled ??= askValidator(this.schema, undefined, COMPILE_LIMIT_MS);
  }

  /**
   * Before the turn's first step (its compile begun at the turn's start, `prepare`): the chat's
   * invalid_request when the schema cannot be used, else undefined. Awaited only at the answer's
   * check, a free step ran the model and its tool calls, and the one constrained step was written
   * whole, before a schema no answer could pass was refused. Throws the signal's reason on a cancel.
   */
  async refusal(signal: AbortSignal): Promise<CoreError | undefined> {
    this.prepare();
    try {
      compiledOrThrow(await abortable(this.compiled as Promise<ValidatorAnswer>, signal));
      return undefined;
    } catch (err) {
      if (isFormatRefused(err)) return err;
      throw err;
    }
  }

  /**
   * The answer's text parsed and validated; never a value that does not match. Throws the
   * chat's invalid_request when the schema cannot be compiled, and the signal's reason on a cancel.
   */
  async check(text: string, signal: AbortSignal): Promise<AnswerCheck> {
    this.prepare();
    compiledOrThrow(await abortable(this.compiled as Promise<ValidatorAnswer>, signal));
    const checked = await abortable(askValidator(this.schema, text, CHECK_LIMIT_MS), signal);
    if (checked.kind === "checked")
      return checked.errors.length === 0
        ? { ok: true, value: checked.value }
        : { ok: false, errors: checked.errors, total: checked.total };
    if (checked.kind === "refused") throw formatRefused(`the schema cannot be used: ${checked.message}`);
    // Fails closed: an answer the validator could not finish with is not taken.
    const why =
      checked.kind === "timeout"
        ? `checking the answer took longer than ${checked.limitMs} ms; it is not taken`
        : `the answer could not be checked (${"message" in checked ? checked.message : checked.kind})`;
    return { ok: false, errors: [{ path: "", message: why }], total: 1 };
  }
}

/** The compile's answer, or the chat's invalid_request when the schema cannot be used. */
function compiledOrThrow(compiled: ValidatorAnswer): void {
  if (compiled.kind === "refused") throw formatRefused(`the schema cannot be used: ${compiled.message}`);
  if (compiled.kind === "timeout")
    throw formatRefused(`the schema took longer than ${compiled.limitMs} ms to compile`);
}

/** A format the chat cannot have: `invalid_request` naming `response_format`. */
export function formatRefused(why: string): CoreError {
  return new CoreError("invalid_request", `params.response_format: ${why}`, { field: "response_format" });
}

/** Whether an error is a refused format (ours, or llama-server's 400 turned into ours). */
export function isFormatRefused(err: unknown): err is CoreError {
  return err instanceof CoreError && err.code === "invalid_request" && err.data?.field === "response_format";
}
