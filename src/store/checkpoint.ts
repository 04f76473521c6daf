import { z } from "zod";
import { type ChatMessage, ChatMessageSchema } from "../protocol/chat-message.ts";

/**
 * A JSON array as it was parsed: z.array, even of z.unknown(), builds a result per element, and a
 * 0.1 file of millions of `{}` cost ~2 GB for 31 MiB before its first was even looked at.
 */
export const JsonArraySchema = z.custom<unknown[]>((v) => Array.isArray(v), "expected an array");

/**
 * Messages checked one at a time, stopping at the first that is not one: z.array keeps an issue
 * per bad element, and a 0.1 file of millions (10 MiB of `1,`: 2 GB) could have the core killed
 * at each start. The issue keeps its place (a resume's warning names it, agent/turn/session.ts).
 */
export const MessagesSchema = JsonArraySchema.transform((items, ctx): ChatMessage[] => {
  const out = new Array<ChatMessage>(items.length);
  for (let i = 0; i < items.length; i++) {
    const m = ChatMessageSchema.safeParse(items[i]);
    if (!m.success) {
      const issue = m.error.issues[0];
      ctx.addIssue({
        code: "custom",
        path: [i, ...(issue?.path ?? [])],
        message: issue?.message ?? "invalid",
      });
      return z.NEVER;
    }
    out[i] = m.data;
  }
  return out;
});

/** The state of an unfinished turn (L2 checkpoint), enough to resume it without redoing tools. */
export const CheckpointSchema = z.object({
  version: z.literal(1),
  trace_id: z.string(),
  user_input: z.string(),
  agent: z.string(),
  /** The next step to run. */
  step: z.number().int().nonnegative(),
  parse_errors: z.number().int().nonnegative(),
  best_text: z.string(),
  /** Messages this turn added after the history (user input first). */
  turn: MessagesSchema,
  /** An edit or a regenerate: the session's messages from this seq on are replaced by the turn. */
  replace_from_seq: z.number().int().nonnegative().optional(),
  /**
   * The turn set aside an interrupted one (not resumed): the saved KV state holding that one goes
   * at the commit, a resume's too (docs/agent.md#prompt-reuse).
   */
  set_aside: z.literal(true).optional(),
  /**
   * What the step being run had streamed when its request failed (the server died, a cancel):
   * its reasoning and text so far, kept for the host to see; the step runs again on resume.
   */
  partial: z
    .object({ step: z.number().int().nonnegative(), reasoning: z.string(), content: z.string() })
    .optional(),
  updated_at: z.string(),
});
export type Checkpoint = z.infer<typeof CheckpointSchema>;

/**
 * An input longer than this is kept apart from its checkpoint's body (`checkpoint_inputs`),
 * written once per turn: the body holds it twice (`user_input`, the turn's opening message),
 * and each save after each step and tool result rewrote both, ~16 MiB for an 8 MiB chat input
 * (a stdio line), 50–226 ms of the main loop a save. A usual input stays in the body: no
 * second row to write.
 */
export const INPUT_APART_CHARS = 64 * 1024;

/** In a body whose input is kept apart: it is not in `user_input`, nor (`opening`) in the turn's first message. */
const ApartSchema = z.object({ opening: z.boolean() });

/** The JSON text of a checkpoint, its input left out when `apart` (its `user_input` and opening message then ""). */
export function checkpointBody(cp: Checkpoint, apart: boolean): string {
  if (!apart) return JSON.stringify(cp);
  const [first, ...rest] = cp.turn;
  const opening = first?.role === "user" && first.content === cp.user_input;
  const turn = opening ? [{ ...first, content: "" }, ...rest] : cp.turn;
  return JSON.stringify({ ...cp, user_input: "", turn, input_apart: { opening } });
}

/**
 * A parsed checkpoint body with its input put back (`input`: the row kept apart, if any, read
 * only for a body that names one); undefined when it names one it cannot put back (not there,
 * or the mark not understood): read without it, the turn would resume with an empty input.
 */
export function withInput(raw: unknown, input: () => string | undefined): unknown {
  if (typeof raw !== "object" || raw === null || !("input_apart" in raw)) return raw;
  const { input_apart, ...cp } = raw as Record<string, unknown>;
  const marked = ApartSchema.safeParse(input_apart);
  const text = marked.success ? input() : undefined;
  if (text === undefined || !marked.success) return undefined;
  const turn = Array.isArray(cp.turn) ? [...cp.turn] : cp.turn;
  if (marked.data.opening && Array.isArray(turn) && typeof turn[0] === "object" && turn[0] !== null)
    turn[0] = { ...turn[0], content: text };
  return { ...cp, user_input: text, turn };
}
