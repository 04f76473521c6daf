import { placedPatternProblem } from "../protocol/schema-problem.ts";
import { parseAnswer } from "./answer-json.ts";
import { type AnswerError, compileSchema, SHOWN_ANSWER_ERRORS } from "./json-validator.ts";
import type { ValidatorAnswer, ValidatorAsk } from "./validator-thread.ts";

/**
 * The structured answer's validator, on a thread of its own (`validator-thread.ts` starts it
 * and holds it to a time limit): compiling a schema and checking an answer may take as long as
 * a hostile schema makes them, and the core's loop still answers ping and cancel. Built as an
 * entry point of its own (build.ts).
 */

declare const self: {
  onmessage: ((event: MessageEvent<ValidatorAsk>) => void) | null;
  postMessage(message: ValidatorAnswer): void;
};

function answer(ask: ValidatorAsk): ValidatorAnswer {
  let validate: ReturnType<typeof compileSchema>;
  let schema: Record<string, unknown> | undefined;
  try {
    schema = JSON.parse(ask.schema) as Record<string, unknown>;
    validate = compileSchema(schema);
  } catch (err) {
    // A stack overflow in the compiler is the schema's fault too. A pattern RE2 refuses is named
    // by its place, as the params check names one (its patterns too long to read on the loop).
    const placed = schema && placedPatternProblem(schema);
    return { id: ask.id, kind: "refused", message: placed ?? (err as Error).message };
  }
  if (ask.text === undefined) return { id: ask.id, kind: "compiled" };
  const parsed = parseAnswer(ask.text);
  if (!parsed.ok) return checked(ask.id, parsed.errors);
  return checked(ask.id, validate(parsed.value), parsed.value);
}

/**
 * The first errors and their count: the core's loop shows no more, and a million of them (an
 * answer of as many failing items) took it a quarter of a second to take off the thread.
 */
function checked(id: number, errors: AnswerError[], value?: unknown): ValidatorAnswer {
  const shown = errors.slice(0, SHOWN_ANSWER_ERRORS);
  return {
    id,
    kind: "checked",
    errors: shown,
    total: errors.length,
    ...(errors.length === 0 ? { value } : {}),
  };
}

self.onmessage = (event) => {
  let reply: ValidatorAnswer;
  try {
    reply = answer(event.data);
  } catch (err) {
    reply = { id: event.data.id, kind: "failed", message: (err as Error).message };
  }
  try {
    self.postMessage(reply);
  } catch (err) {
    // A value the thread cannot hand over (nested past the clone's depth): not taken.
    self.postMessage({ id: event.data.id, kind: "failed", message: (err as Error).message });
  }
};
self.postMessage({ id: 0, kind: "ready" });
