import type { ToolCall } from "../protocol/chat-message.ts";
import { logger } from "../util/logger.ts";

/**
 * One streamed fragment of a tool call (test/fixtures/llama-server/transcripts/14, 16:
 * `delta.tool_calls[]`).
 */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: string;
  function?: { name?: string; arguments?: string };
}

/**
 * Longest id a call keeps. llama-server makes 32-character ids; a model that writes its own (some
 * chat formats carry them in the model's text) can write any, and each is stored twice (the call
 * and its result) and sent back every step.
 */
export const MAX_TOOL_CALL_ID_CHARS = 64;

/**
 * Most tool calls one reply's stream assembles: a step runs 64 (docs/agent.md, MAX_CALLS_PER_STEP)
 * and answers the rest as not run, each stored; a runaway model (or a hostile server) could
 * stream any number within its context, so those past this many are dropped, not assembled nor
 * stored (the reply and the step go on with the first ones; logged).
 */
export const MAX_STREAMED_CALLS = 256;

/** Printable ASCII without spaces: an id as llama-server and OpenAI make them. */
const USABLE_ID = new RegExp(`^[\\x21-\\x7e]{1,${MAX_TOOL_CALL_ID_CHARS}}$`);

/**
 * Joins streamed tool-call fragments by `index`: the first carries id and name, the rest argument
 * text. Each call of a step leaves with an id of its own: a resume tells the calls already
 * answered by their ids, so two calls sharing one would leave the second never run
 * (docs/agent.md#tool-calls). An id missing, repeated, over MAX_TOOL_CALL_ID_CHARS or not
 * printable ASCII becomes `call_<n>`, one not taken in the step.
 */
export class ToolCallAssembler {
  private readonly byIndex = new Map<number, { id: string; name: string; args: string }>();
  /** Characters of names and arguments so far (completion.ts bounds the reply by them). */
  chars = 0;
  /** Deltas of calls past MAX_STREAMED_CALLS, dropped. */
  dropped = 0;

  push(delta: ToolCallDelta): void {
    const index = typeof delta.index === "number" ? delta.index : 0;
    let call = this.byIndex.get(index);
    if (!call) {
      if (this.byIndex.size >= MAX_STREAMED_CALLS) {
        this.dropped++;
        return;
      }
      call = { id: "", name: "", args: "" };
      this.byIndex.set(index, call);
    }
    if (typeof delta.id === "string" && delta.id) call.id = delta.id;
    const name = delta.function?.name;
    if (name) {
      call.name += name;
      this.chars += name.length;
    }
    const args = delta.function?.arguments;
    if (args) {
      call.args += args;
      this.chars += args.length;
    }
  }

  calls(): ToolCall[] {
    if (this.dropped > 0)
      logger.warn(
        `llama-server streamed more than ${MAX_STREAMED_CALLS} tool calls in one reply: the first ${MAX_STREAMED_CALLS} kept, ${this.dropped} deltas of the others dropped`,
      );
    const ordered = [...this.byIndex.entries()].sort(([a], [b]) => a - b).map(([, c]) => c);
    const kept = new Set<string>();
    const keep = ordered.map((c) => {
      const ok = USABLE_ID.test(c.id) && !kept.has(c.id);
      if (ok) kept.add(c.id);
      return ok;
    });
    let next = 0;
    return ordered.map((c, i) => {
      let id = c.id;
      if (!keep[i]) {
        do id = `call_${next++}`;
        while (kept.has(id));
        kept.add(id);
      }
      return { id, type: "function" as const, function: { name: c.name, arguments: c.args } };
    });
  }
}
