import { z } from "zod";
import {
  ConnectionRefused,
  errorBody,
  errorText,
  LlmError,
  notJson,
  SlotError,
  statusError,
} from "./errors.ts";
import { answerText, call, type LlamaEndpoint } from "./http.ts";

/**
 * llama-server's slots (test/fixtures/llama-server/transcripts/93–93e): a slot's KV cache saved
 * to a file under `--slot-save-path` and restored from it (by another process too). The file names
 * no model: a model of the same shape restores another's file without complaint (93d), so whoever
 * saves must fingerprint it. A slot id past the slot count is not refused (93b: it saves 0
 * tokens), so the caller keeps to its own slots.
 */

const count = z.number().int().nonnegative();

export const SlotSavedSchema = z.object({
  id_slot: count,
  filename: z.string(),
  /** Tokens saved (0 for an empty slot) and the file's bytes. */
  n_saved: count,
  n_written: count,
  timings: z.object({ save_ms: z.number() }),
});
export type SlotSaved = z.output<typeof SlotSavedSchema>;

export const SlotRestoredSchema = z.object({
  id_slot: count,
  filename: z.string(),
  n_restored: count,
  n_read: count,
  timings: z.object({ restore_ms: z.number() }),
});
export type SlotRestored = z.output<typeof SlotRestoredSchema>;

/** Saves slot `id`'s KV cache as `filename` (a bare name) under `--slot-save-path`. */
export function saveSlot(
  server: LlamaEndpoint,
  id: number,
  filename: string,
  signal?: AbortSignal,
): Promise<SlotSaved> {
  return slotAction(server, id, "save", SlotSavedSchema, signal, filename);
}

/** Fills slot `id` from `filename`; `restore_failed` when it is missing or of another shape. */
export function restoreSlot(
  server: LlamaEndpoint,
  id: number,
  filename: string,
  signal?: AbortSignal,
): Promise<SlotRestored> {
  return slotAction(server, id, "restore", SlotRestoredSchema, signal, filename);
}

/** The answer to an erase (93b): the slot and how many tokens it held. */
export const SlotErasedSchema = z.object({ id_slot: count, n_erased: count });

/**
 * Empties slot `id`: its tokens and KV cache go, without passing through llama-server's RAM cache
 * (93b). A busy slot is emptied once its task ends; a server without `--slot-save-path` answers
 * 501, as for the other actions.
 */
export function eraseSlot(server: LlamaEndpoint, id: number, signal?: AbortSignal): Promise<unknown> {
  return slotAction(server, id, "erase", SlotErasedSchema, signal, "");
}

/**
 * How long GET /slots is waited for (`slotsAnswered`). A wedged server (its HTTP threads all
 * busy, its loop stuck) answered it at its exit only, a late save's file kept that long; "not
 * answered" costs no more than a look again later (kv-temps.ts `watchLateTemp`), and a loop
 * answers it between two batches of a decode. An object, so a test can lower it.
 */
export const SLOTS_ANSWER = { ms: 10_000 };

/**
 * Whether llama-server's loop answered GET /slots: a task it puts at its queue's front, run
 * between two tasks (or during a decode), never during a slot save, which its loop writes whole
 * (b10587 server-context.cpp `process_single_task`), so a save whose file was there when this was
 * asked is over. A server started with `--no-slots` answers 501 without its loop: no proof is
 * to be had, true (the file's two looks alone, as before). False on any other failure, and
 * past `SLOTS_ANSWER.ms`.
 */
export async function slotsAnswered(server: LlamaEndpoint, signal?: AbortSignal): Promise<boolean> {
  const deadline = AbortSignal.timeout(SLOTS_ANSWER.ms);
  const within = signal ? AbortSignal.any([signal, deadline]) : deadline;
  try {
    const res = await call(server, "/slots", { signal: within });
    if (res.ok) await answerText(res, "/slots", within);
    else await res.body?.cancel();
    return res.ok || res.status === 501;
  } catch {
    return false;
  }
}

/**
 * Whether a failed slot action left no task of it in llama-server: it answered with an error
 * status (its slot actions answer once their task is over, 93b), or the connection was refused
 * (the request never reached it). Any other failure (a reset or cut connection, a timeout, a
 * cancel, an answer unreadable) may leave the task queued there, to run to its end later.
 */
export function noTaskLeft(err: unknown): boolean {
  return err instanceof ConnectionRefused || answeredWith(err);
}

/** Whether llama-server answered a slot action with an error status (its task over, 93b). */
export function answeredWith(err: unknown): boolean {
  return err instanceof SlotError || (err instanceof LlmError && err.status !== undefined);
}

type Action = "save" | "restore" | "erase";

async function slotAction<T extends z.ZodType>(
  server: LlamaEndpoint,
  id: number,
  action: Action,
  schema: T,
  signal: AbortSignal | undefined,
  filename: string,
): Promise<z.output<T>> {
  const path = `/slots/${id}?action=${action}`;
  const res = await call(server, path, { body: JSON.stringify({ filename }), signal });
  const text = res.ok ? await answerText(res, path, signal) : await errorText(res, signal);
  return parsed(schema, res, path, text, { id, action });
}

/** A 2xx body read by its schema; an error status mapped to SlotError where the action has its own. */
function parsed<T extends z.ZodType>(
  schema: T,
  res: Response,
  path: string,
  text: string,
  slot: { id: number; action: Action },
): z.output<T> {
  if (!res.ok) throw slotError(res.status, text, slot) ?? statusError(res.status, res.statusText, text);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw notJson(`an answer to ${path}`, text);
  }
  const result = schema.safeParse(json);
  if (!result.success)
    throw new LlmError(
      "bad_response",
      `llama-server's answer to ${path} is of another shape: ${result.error.message}`,
    );
  return result.data;
}

/** The recorded failures of a slot action (93b, 93c, 93e), or undefined for the generic mapping. */
function slotError(
  status: number,
  text: string,
  slot: { id: number; action: Action },
): SlotError | undefined {
  const message = errorBody(text)?.message ?? "";
  const what = `llama-server could not ${slot.action} slot ${slot.id}: ${message}`;
  if (status === 501) return new SlotError("not_supported", what, slot.id);
  if (status !== 400) return undefined;
  if (message === "Invalid filename") return new SlotError("invalid_filename", what, slot.id);
  if (slot.action === "restore") return new SlotError("restore_failed", what, slot.id);
  return undefined;
}
