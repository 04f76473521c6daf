import type { ToolCall } from "../protocol/chat-message.ts";

/**
 * Longest arguments a call may carry. Longer ones are a malformed call (a runaway model, not a
 * real request): they are not run, not echoed in events, and not kept in the conversation.
 */
export const MAX_ARGUMENT_CHARS = 100_000;

/** A call ready to run: the function name the model used and its parsed arguments. */
export interface ParsedCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
}

export type StepOutcome =
  | { kind: "final"; text: string }
  | { kind: "calls"; text: string; calls: ParsedCall[]; toolCalls: ToolCall[] }
  | { kind: "malformed"; text: string; problems: string[]; toolCalls: ToolCall[] };

const TAG = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;

/**
 * Decides what a finished step asked for. Native tool calls (llama-server --jinja) win; without
 * them, `<tool_call>{"name":…,"arguments":{…}}</tool_call>` in the text is the fallback, and a
 * reply that is nothing but such a JSON object naming a known tool counts too. A call that is
 * recognisably a call but cannot be used (bad JSON, unknown tool, arguments not an object) is
 * `malformed`, with problems worded for the model to fix.
 */
export function interpretStep(
  content: string,
  native: ToolCall[],
  known: ReadonlySet<string>,
  step: number,
): StepOutcome {
  if (native.length > 0) {
    const problems: string[] = [];
    const calls: ParsedCall[] = [];
    for (const tc of native) {
      const parsed = parseCall(tc.function.name, tc.function.arguments, known);
      if (typeof parsed === "string") problems.push(parsed);
      else calls.push({ id: tc.id, ...parsed });
    }
    if (problems.length > 0)
      return { kind: "malformed", text: content, problems, toolCalls: native.map(withSafeArguments) };
    return { kind: "calls", text: content, calls, toolCalls: native };
  }

  const tagged = [...content.matchAll(TAG)].map((m) => (m[1] ?? "").trim());
  const outside = content.replace(TAG, "").trim();
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
    try {
      obj = JSON.parse(body);
    } catch (err) {
      problems.push(`the text inside <tool_call> is not valid JSON (${(err as Error).message})`);
      return;
    }
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
  if (problems.length > 0) return { kind: "malformed", text: outside, problems, toolCalls: [] };
  return { kind: "calls", text: outside, calls, toolCalls };
}

function parseCall(
  name: string,
  args: string,
  known: ReadonlySet<string>,
): { name: string; args: Record<string, unknown> } | string {
  if (!known.has(name)) {
    const list = [...known].join(", ") || "none";
    const shown = name.length > 80 ? `${name.slice(0, 80)}…` : name;
    return `unknown tool '${shown}' (available: ${list})`;
  }
  if (args.length > MAX_ARGUMENT_CHARS) {
    return `the arguments for '${name}' are ${args.length} characters long, over the limit of ${MAX_ARGUMENT_CHARS}`;
  }
  let value: unknown;
  try {
    value = args.trim() === "" ? {} : JSON.parse(args);
  } catch (err) {
    return `the arguments for '${name}' are not valid JSON (${(err as Error).message})`;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return `the arguments for '${name}' must be a JSON object`;
  }
  return { name, args: value as Record<string, unknown> };
}

function looksLikeKnownCall(text: string, known: ReadonlySet<string>): boolean {
  const m = /^\{\s*"name"\s*:\s*"([^"]+)"/.exec(text);
  return m !== null && known.has(m[1] ?? "");
}

/**
 * A malformed call as it goes back to the model: arguments that are not a JSON object (or are
 * over the limit) become "{}", because llama-server's templates parse them and would fail the
 * whole request; the tool message beside it says what was wrong.
 */
function withSafeArguments(tc: ToolCall): ToolCall {
  const args = tc.function.arguments;
  let ok = false;
  if (args.length <= MAX_ARGUMENT_CHARS) {
    try {
      const v = JSON.parse(args);
      ok = typeof v === "object" && v !== null && !Array.isArray(v);
    } catch {
      ok = false;
    }
  }
  const name = tc.function.name.length > 200 ? tc.function.name.slice(0, 200) : tc.function.name;
  return { ...tc, function: { name, arguments: ok ? args : "{}" } };
}
