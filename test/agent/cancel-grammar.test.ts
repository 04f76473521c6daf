import { describe, expect, test } from "bun:test";
import { ChatHarness, type Msg, names } from "./harness.ts";

/**
 * The chat events' grammar under a cancel at every point (docs/protocol.md, the chat events):
 * `run_start, memory_start, memory_done, warmup_progress*`, per step `llm_start, llm_reasoning*,
 * llm_chunk*, llm_done, (tool_start, tool_done)*`, then `final` or `loop_abort`. A cancel cuts
 * it short anywhere, but a started tool call always gets its `tool_done`; then
 * `loop_abort {reason:"cancelled"}` and the error `cancelled`. Once the cancel is answered,
 * nothing new begins and no more text streams.
 */
const LETTER: Record<string, string> = {
  run_start: "R",
  memory_start: "M",
  memory_done: "D",
  warmup_progress: "W",
  llm_start: "S",
  llm_reasoning: "r",
  llm_chunk: "c",
  llm_done: "E",
  tool_start: "T",
  tool_done: "U",
  final: "F",
  loop_abort: "A",
};
const STEPS = "(?:Sr*c*E(?:TU)*)*";
const FINISHED = new RegExp(`^RMDW*${STEPS}F$`);
/** A prefix of a finished turn that leaves no tool call open (a step may be cut mid-stream), then loop_abort. */
const CANCELLED = new RegExp(`^(?:R(?:M(?:DW*${STEPS}(?:Sr*c*)?)?)?)?A$`);

/** A resumed turn first answers its interrupted step's calls, before its first llm_start. */
const RESUMED = new RegExp(`^RMDW*(?:TU)*${STEPS}F$`);
const RESUMED_CANCELLED = new RegExp(`^(?:R(?:M(?:DW*(?:TU)*${STEPS}(?:Sr*c*)?)?)?)?A$`);

/** The events that may follow a cancel's acknowledgement, before loop_abort: they end work already begun. */
const CLOSING = new Set(["tool_done", "memory_done"]);

const word = (events: Msg[]) =>
  names(events)
    .map((n) => LETTER[n] ?? "?")
    .join("");

/** Two steps: reasoning and two tool calls, then a streamed answer. */
function script(h: ChatHarness): void {
  h.llama.script(
    {
      reasoning: ["I need", " the tools."],
      tool_calls: [
        { name: "t__echo", arguments: { text: "one" } },
        { name: "t__echo", arguments: { text: "two" } },
      ],
    },
    { content: ["all", " done"] },
  );
}

function harness(): ChatHarness {
  const h = new ChatHarness({
    // An event per piece, so each chat streams the same events to cancel at.
    app: { data_dir: "./data", max_parse_errors: 2, max_steps: 8, stream_gather_ms: 0 },
  });
  // The stand-in is always up: the chat hears one wait for it, as a cold start's would be.
  h.provider.progress = { phase: "loading", elapsed_ms: 0 };
  return h;
}

/** How one kind of chat is run: set up before each (its script, a checkpoint), and its params. */
interface Run {
  prepare: (h: ChatHarness, session: string) => void;
  params: (session: string) => Record<string, unknown>;
  finished: RegExp;
  cancelled: RegExp;
}

/** Runs the chat to its end, then once per event but the last, cancelled as that event is emitted. */
async function cancelAtEvery(h: ChatHarness, run: Run): Promise<string> {
  h.send("warm", "cancel", { request_id: "nobody" });
  expect((await h.terminal("warm")).result).toEqual({ cancelled: false });
  run.prepare(h, "full");
  const whole = await h.chat("full", run.params("full"));
  expect(whole.terminal.type).toBe("result");
  expect(word(whole.events)).toMatch(run.finished);

  // A fresh session each time.
  for (let at = 0; at < whole.events.length - 1; at++) {
    const id = `c${at}`;
    let seen = 0;
    h.onEmit = (m: Msg) => {
      if (m.id === id && m.type === "event" && seen++ === at) h.send(`k${at}`, "cancel", { request_id: id });
    };
    run.prepare(h, `s${at}`);
    const { terminal, events } = await h.chat(id, run.params(`s${at}`));
    const where = `cancelled at ${at} (${whole.events[at]?.event}): ${word(events)}`;
    expect({ where, cancel: (await h.terminal(`k${at}`)).result }).toEqual({
      where,
      cancel: { cancelled: true },
    });
    expect({ where, ok: run.cancelled.test(word(events)) }).toEqual({ where, ok: true });
    // Once the cancel is answered {cancelled:true}, nothing new begins and no more text streams:
    // only what ends work already begun (the running call's tool_done, the recall's memory_done).
    const after = names(events.slice(at + 1, -1)).filter((n) => !CLOSING.has(n));
    expect({ where, after }).toEqual({ where, after: [] });
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", reason: "cancelled" });
    // loop_abort names the step the turn was in: that of the last event with one (before any,
    // that of the turn's first: a resume's interrupted step, whose calls come first).
    const stepped = events.slice(0, -1).filter((e) => typeof e.step === "number");
    const first = whole.events.find((e) => typeof e.step === "number")?.step;
    expect({ where, step: events.at(-1)?.step }).toEqual({ where, step: stepped.at(-1)?.step ?? first });
    expect(terminal).toMatchObject({ type: "error", code: "cancelled" });
    // Nothing after the terminal message.
    expect(h.out.filter((m) => m.id === id).at(-1)).toBe(terminal);
    h.onEmit = () => {};
    h.llama.unscript();
  }
  return word(whole.events);
}

describe("chat events under a cancel at every point", () => {
  test("each cancelled chat's events parse by the grammar, then loop_abort cancelled and the error", async () => {
    await using h = harness();
    const whole = await cancelAtEvery(h, {
      prepare: script,
      params: (session) => ({ input: "work", session_id: session }),
      finished: FINISHED,
      cancelled: CANCELLED,
    });
    expect(whole).toBe("RMDWSrrETUTUSccEF");
  }, 60_000);

  test("a response_format chat with tools, one denied: its free and constrained steps alike", async () => {
    await using h = harness();
    const whole = await cancelAtEvery(h, {
      prepare: (h) =>
        h.llama.script(
          {
            tool_calls: [
              { name: "t__write_note", arguments: { text: "x" } },
              { name: "t__echo", arguments: { text: "one" } },
            ],
          },
          { content: ["it is", " Ada"] },
          { content: ['{"name":', '"Ada"}'] },
        ),
      params: (session) => ({ input: "work", session_id: session, response_format: { type: "json_object" } }),
      finished: FINISHED,
      cancelled: CANCELLED,
    });
    expect(whole).toBe("RMDWSETUTUSccESccEF");
  }, 60_000);
});

/**
 * A checkpoint whose last step asked for two calls, neither answered (a core killed there), or
 * with `answered` both answered (killed before the next step began).
 */
function interrupted(h: ChatHarness, session: string, answered = false): void {
  const call = (id: string, text: string) => ({
    id,
    type: "function" as const,
    function: { name: "t__echo", arguments: JSON.stringify({ text }) },
  });
  h.writeCheckpoint(session, {
    version: 1,
    trace_id: "0000000000000000",
    user_input: "work",
    agent: "assistant",
    step: 1,
    parse_errors: 0,
    best_text: "",
    turn: [
      { role: "user", content: "work" },
      { role: "assistant", content: null, tool_calls: [call("a", "one"), call("b", "two")] },
      ...(answered
        ? [
            { role: "tool" as const, tool_call_id: "a", content: "one" },
            { role: "tool" as const, tool_call_id: "b", content: "two" },
          ]
        : []),
    ],
    updated_at: "2026-01-01T00:00:00.000Z",
  });
}

/** A resume of `interrupted`'s checkpoint, answered in one streamed step. */
const resumed = (answered: boolean): Run => ({
  prepare: (h, session) => {
    interrupted(h, session, answered);
    h.llama.script({ content: ["all", " done"] });
  },
  params: (session) => ({ session_id: session, resume: true }),
  finished: RESUMED,
  cancelled: RESUMED_CANCELLED,
});

describe("a resumed turn's events under a cancel at every point", () => {
  test("the interrupted step's calls come first, paired; a cancel anywhere ends as documented", async () => {
    await using h = harness();
    const whole = await cancelAtEvery(h, resumed(false));
    expect(whole).toBe("RMDWTUTUSccEF");
  }, 60_000);

  test("with its calls answered it begins at the next step: a cancel before names that step", async () => {
    await using h = harness();
    const whole = await cancelAtEvery(h, resumed(true));
    expect(whole).toBe("RMDWSccEF");
  }, 60_000);
});
