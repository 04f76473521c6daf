import { CoreError } from "../../protocol/errors.ts";
import type { ResponseFormat } from "../../protocol/response-format.ts";
import { type AnswerError, compileSchema, type Validate } from "../json-validator.ts";

/** What the answer of a `response_format` chat came to: its value, or why it does not count. */
export type AnswerCheck = { ok: true; value: unknown } | { ok: false; errors: AnswerError[] };

/** `json_object`: any object, as llama-server's grammar for it produces. */
const ANY_OBJECT = { type: "object" };

/**
 * The chat's `response_format` (docs/agent.md#thinking-and-structured-output): how a constrained
 * step asks llama-server for it, and the check of the answer against the schema, which fails
 * closed. The validator is compiled once the request is on its way (`prepare`), while llama-server
 * reads the prompt.
 */
export class AnswerFormat {
  private validate: Validate | undefined;

  constructor(readonly format: ResponseFormat) {}

  /**
   * The request field, in llama-server's (OpenAI's) shape
   * (test/fixtures/llama-server/transcripts/95, 95c).
   */
  request(): Record<string, unknown> {
    const f = this.format;
    if (f.type === "json_object") return { type: "json_object" };
    return { type: "json_schema", json_schema: { ...(f.name ? { name: f.name } : {}), schema: f.schema } };
  }

  /** Compiles the validator (once); a schema it cannot compile is the chat's invalid_request. */
  prepare(): void {
    if (this.validate) return;
    const schema = this.format.type === "json_schema" ? this.format.schema : ANY_OBJECT;
    try {
      this.validate = compileSchema(schema);
    } catch (err) {
      throw formatRefused(`the schema cannot be used: ${(err as Error).message}`);
    }
  }

  /** The answer's text parsed and validated; never a value that does not match. */
  check(text: string): AnswerCheck {
    this.prepare();
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      const why = text.trim() === "" ? "the answer is empty" : `not valid JSON (${(err as Error).message})`;
      return { ok: false, errors: [{ path: "", message: why }] };
    }
    const errors = (this.validate as Validate)(value);
    return errors.length === 0 ? { ok: true, value } : { ok: false, errors };
  }
}

/** A format the chat cannot have: `invalid_request` naming `response_format`. */
export function formatRefused(why: string): CoreError {
  return new CoreError("invalid_request", `params.response_format: ${why}`, { field: "response_format" });
}

/** Whether an error is a refused format (ours, or llama-server's 400 turned into ours). */
export function isFormatRefused(err: unknown): err is CoreError {
  return err instanceof CoreError && err.code === "invalid_request" && err.data?.field === "response_format";
}
