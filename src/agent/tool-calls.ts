import { MAX_STREAMED_CALLS } from "../llama/tool-call-deltas.ts";
import type { ToolCall } from "../protocol/chat-message.ts";
import { logger } from "../util/logger.ts";
import { cutText, wholeCharCut } from "../util/text-cut.ts";

/**
 * Longest arguments a call may carry. Longer ones are a malformed call (a runaway model, not a
 * real request): they are not run, not echoed in events, and not kept in the conversation.
 */
export const MAX_ARGUMENT_CHARS = 100_000;

/**
 * Deepest nesting of arrays and objects a call's arguments (or a `<tool_call>` body) may have.
 * Bun's JSON.parse takes any depth but JSON.stringify throws past a few thousand levels, which
 * would fail the `tool_start` event and every resume after it (docs/agent.md#tool-calls).
 */
export const MAX_ARGUMENT_DEPTH = 64;
/** Problems listed to the model (and in the log, and `loop_abort`): the rest are counted. */
export const MAX_LISTED_PROBLEMS = 5;
/** Tool names listed in an "unknown tool" problem, and their characters at most. */
const MAX_LISTED_TOOLS = 20;
const MAX_TOOL_LIST_CHARS = 600;
/** Longest single problem: a parser's message can quote what it read. */
const MAX_PROBLEM_CHARS = 400;

/** A call ready to run: the function name the model used and its parsed arguments. */
export interface ParsedCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
}

export type StepOutcome =
  | { kind: "final"; text: string }
  | { kind: "calls"; text: string; calls: ParsedCall[]; toolCalls: ToolCall[] }
  | {
      kind: "malformed";
      text: string;
      /** What was wrong, at most MAX_LISTED_PROBLEMS of them and then "…and N more". */
      problems: string[];
      toolCalls: ToolCall[];
      /** Native calls: each call's own problem (index for index), undefined for a usable one. */
      callProblems: (string | undefined)[];
    };

const TAG = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;

/**
 * Decides what a finished step asked for. Native tool calls (llama-server --jinja) win; without
 * them, `<tool_call>{"name":…,"arguments":{…}}</tool_call>` in the text is the fallback, and a
 * reply that is nothing but such a JSON object naming a known tool counts too (for an agent
 * without tools, the text is the answer whatever it holds). A call that is
 * recognisably a call but cannot be used (bad JSON, unknown tool, arguments not an object) is
 * `malformed`, with problems worded for the model to fix.
 */
export function interpretStep(
  content: string,
  native: ToolCall[],
  known: ReadonlySet<string>,
  step: number,
  /** The agent names tools, none of which could be loaded: a call is one, told none is available. */
  toolsNamed = false,
): StepOutcome {
  if (native.length > 0) {
    const problems: string[] = [];
    const calls: ParsedCall[] = [];
    const callProblems = native.map((tc) => {
      const parsed = parseCall(tc.function.name, tc.function.arguments, known);
      if (typeof parsed !== "string") {
        calls.push({ id: tc.id, ...parsed });
        return undefined;
      }
      problems.push(parsed);
      return parsed;
    });
    if (problems.length > 0) {
      const toolCalls = native.map(withSafeArguments);
      return { kind: "malformed", text: content, problems: listed(problems), toolCalls, callProblems };
    }
    return { kind: "calls", text: content, calls, toolCalls: native.map(withObjectArguments) };
  }
  // An agent without tools: `<tool_call>` text (the syntax explained, or a model's habit) was
  // re-prompted as an unknown tool up to max_parse_errors, the answer cut around it. One whose
  // tools could not be loaded is told so instead: its prompt told the model of them, and its
  // call, markup and all, would be the response.
  if (known.size === 0 && !toolsNamed) return { kind: "final", text: content };
  return textCalls(content, known, step);
}

/** The calls written in the text: `<tool_call>` bodies, or a reply that is only a call's JSON. */
function textCalls(content: string, known: ReadonlySet<string>, step: number): StepOutcome {
  const tagged = taggedBodies(content);
  let outside = content.replace(TAG, "").trim();
  let bodies = tagged;
  if (bodies.length === 0) {
    const whole = content.trim();
    if (!(whole.startsWith("{") && whole.endsWith("}") && looksLikeKnownCall(whole, known))) {
      return { kind: "final", text: content };
    }
    bodies = [whole];
  }
  const problems: string[] = [];
  const calls: ParsedCall[] = [];
  bodies.forEach((body, i) => {
    let obj: unknown;
    if (nestingDepth(body) > MAX_ARGUMENT_DEPTH + 1) {
      problems.push(`the text inside <tool_call> is nested deeper than ${MAX_ARGUMENT_DEPTH} levels`);
      // Bare and one JSON value, it is still the call alone (Bun's JSON.parse takes any depth).
      if (tagged.length === 0 && oneValue(body)) outside = "";
      return;
    }
    try {
      // The reviver here too: parsed plainly, 1e400 became Infinity, then null once stringified,
      // and the call ran with null where the model had written a number.
      obj = JSON.parse(body, unreadable);
    } catch (err) {
      // One JSON value still, a number or string in it refused: the call and nothing else.
      if (err instanceof UnreadableArguments) {
        if (tagged.length === 0) outside = "";
        problems.push(`the text inside <tool_call> ${err.message}`);
      } else
        problems.push(capped(`the text inside <tool_call> is not valid JSON (${(err as Error).message})`));
      return;
    }
    // A bare reply that is one JSON value is the call and nothing else, as a tag's body is: kept
    // as text, it was stored as the assistant's words beside the same call and, at a limit, was
    // the turn's best text. One that is not (a call, then words, then braces) keeps its words.
    if (tagged.length === 0) outside = "";
    if (typeof obj !== "object" || obj === null || typeof (obj as { name?: unknown }).name !== "string") {
      problems.push('a tool call must be a JSON object {"name": "...", "arguments": {...}}');
      return;
    }
    const o = obj as { name: string; arguments?: unknown; parameters?: unknown };
    const rawArgs = o.arguments ?? o.parameters ?? {};
    const parsed = parseCall(o.name, typeof rawArgs === "string" ? rawArgs : JSON.stringify(rawArgs), known);
    if (typeof parsed === "string") problems.push(parsed);
    else calls.push({ id: `call_${step}_${i}`, ...parsed });
  });
  const toolCalls: ToolCall[] = calls.map((c) => ({
    id: c.id,
    type: "function",
    function: { name: c.name, arguments: JSON.stringify(c.args) },
  }));
  if (problems.length > 0)
    return { kind: "malformed", text: outside, problems: listed(problems), toolCalls: [], callProblems: [] };
  return { kind: "calls", text: outside, calls, toolCalls };
}

/**
 * The `<tool_call>` bodies of the text, the first MAX_STREAMED_CALLS of them: as for native calls
 * (tool-call-deltas.ts), a reply of thousands is a runaway model, and each kept call would be a
 * tool message stored and sent back (docs/agent.md#tool-calls).
 */
function taggedBodies(content: string): string[] {
  const bodies: string[] = [];
  let more = 0;
  for (const m of content.matchAll(TAG)) {
    if (bodies.length < MAX_STREAMED_CALLS) bodies.push((m[1] ?? "").trim());
    else more++;
  }
  if (more > 0)
    logger.warn(
      `the model wrote more than ${MAX_STREAMED_CALLS} <tool_call>s in one reply: the first ${MAX_STREAMED_CALLS} kept, ${more} dropped`,
    );
  return bodies;
}

function parseCall(
  name: string,
  args: string,
  known: ReadonlySet<string>,
): { name: string; args: Record<string, unknown> } | string {
  if (!known.has(name)) {
    const shown = (name.length > 80 ? `${name.slice(0, 80)}…` : name).toWellFormed();
    return `unknown tool '${shown}' (available: ${toolList(known)})`;
  }
  if (args.length > MAX_ARGUMENT_CHARS) {
    return `the arguments for '${name}' are ${args.length} characters long, over the limit of ${MAX_ARGUMENT_CHARS}`;
  }
  if (nestingDepth(args) > MAX_ARGUMENT_DEPTH) {
    return `the arguments for '${name}' are nested deeper than ${MAX_ARGUMENT_DEPTH} levels`;
  }
  let value: unknown;
  try {
    value = args.trim() === "" ? {} : JSON.parse(args, unreadable);
  } catch (err) {
    if (err instanceof UnreadableArguments) return `the arguments for '${name}' ${err.message}`;
    return capped(`the arguments for '${name}' are not valid JSON (${(err as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return `the arguments for '${name}' must be a JSON object`;
  }
  return { name, args: value as Record<string, unknown> };
}

class UnreadableArguments extends Error {}

/**
 * A JSON.parse reviver refusing what Bun's parser takes but llama-server's (nlohmann) refuses: a
 * lone surrogate escape (`"\ud800"`) and a number past a double (`1e400`). Such a call, sent back
 * in the history, fails every later request of the turn with a 500 quoting the arguments.
 */
function unreadable(key: string, value: unknown): unknown {
  if (typeof value === "number" && !Number.isFinite(value))
    throw new UnreadableArguments("hold a number too large for a double");
  if ((typeof value === "string" && !value.isWellFormed()) || !key.isWellFormed())
    throw new UnreadableArguments("hold a lone UTF-16 surrogate escape (half of a \\uD83D\\uDE00 pair)");
  return value;
}

/**
 * The known tools as an "unknown tool" problem lists them: the first few, within a bound, so
 * a step of many bad calls does not repeat a long list in each (docs/agent.md#tool-calls).
 */
function toolList(known: ReadonlySet<string>): string {
  if (known.size === 0) return "none";
  const shown: string[] = [];
  let chars = 0;
  for (const name of known) {
    if (shown.length >= MAX_LISTED_TOOLS || chars + name.length > MAX_TOOL_LIST_CHARS) break;
    shown.push(name);
    chars += name.length + 2;
  }
  const rest = known.size - shown.length;
  return rest > 0 ? `${shown.join(", ")}, …and ${rest} more` : shown.join(", ");
}

/** The first problems, then how many more: what a step reports stays bounded however many calls it made. */
function listed(problems: string[]): string[] {
  if (problems.length <= MAX_LISTED_PROBLEMS) return problems;
  const more = problems.length - MAX_LISTED_PROBLEMS;
  return [...problems.slice(0, MAX_LISTED_PROBLEMS), `…and ${more} more`];
}

/**
 * A parser's problem, bounded and made text: the parser quotes the token it stopped at, half an
 * emoji when it was one (`Unrecognized token '\ud83d'`), and the problem is stored with the turn
 * and shown in warnings, where a lone surrogate makes a line a strict JSON parser refuses.
 */
const capped = (problem: string) => cutText(problem, MAX_PROBLEM_CHARS).toWellFormed();

/** Whether the text is one JSON value. */
function oneValue(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * How deep arrays and objects nest in a JSON text, read without recursion or parsing (brackets
 * inside strings do not count); invalid JSON is the parser's to report.
 */
export function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

function looksLikeKnownCall(text: string, known: ReadonlySet<string>): boolean {
  const m = /^\{\s*"name"\s*:\s*"([^"]+)"/.exec(text);
  return m !== null && known.has(m[1] ?? "");
}

/**
 * A usable call as it goes back to the model: empty arguments (llama-server's for a call written
 * without an "arguments" key, a tool with no parameters) ran as {} and are sent as "{}", since
 * its templates parse them and would refuse the turn's every later request.
 */
function withObjectArguments(tc: ToolCall): ToolCall {
  if (tc.function.arguments.trim() !== "") return tc;
  return { ...tc, function: { ...tc.function, arguments: "{}" } };
}

/**
 * A malformed call as it goes back to the model: arguments that are not a JSON object (or are
 * over a limit) become "{}", because llama-server's templates parse them and would fail the
 * whole request; the tool message beside it says what was wrong.
 */
function withSafeArguments(tc: ToolCall): ToolCall {
  const args = tc.function.arguments;
  let ok = false;
  if (args.length <= MAX_ARGUMENT_CHARS && nestingDepth(args) <= MAX_ARGUMENT_DEPTH) {
    try {
      const v = JSON.parse(args, unreadable);
      ok = typeof v === "object" && v !== null && !Array.isArray(v);
    } catch {
      ok = false;
    }
  }
  // Cut between characters: half an emoji is a lone surrogate, which llama-server's parser refuses.
  const name = tc.function.name.slice(0, wholeCharCut(tc.function.name, 200));
  return { ...tc, function: { name, arguments: ok ? args : "{}" } };
}
