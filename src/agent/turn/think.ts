import type { Think } from "../../protocol/think.ts";

/**
 * `think` as llama-server's request fields (docs/agent.md#thinking-and-structured-output; read in
 * its server-common.cpp, recorded in 91c and 91d): `chat_template_kwargs.enable_thinking` for
 * templates that open a think block, `reasoning_effort` for those that take an effort,
 * `reasoning_budget_tokens` for the sampler that ends the block after N tokens. Undefined asks
 * nothing: the template's default.
 */
export function thinkFields(think: Think | undefined): ThinkFields {
  if (think === undefined) return {};
  const enabled = { chat_template_kwargs: { enable_thinking: think !== false } };
  if (typeof think === "string") return { ...enabled, reasoning_effort: think };
  if (typeof think === "object") return { ...enabled, reasoning_budget_tokens: think.budget_tokens };
  return enabled;
}

export interface ThinkFields {
  chat_template_kwargs?: { enable_thinking: boolean };
  reasoning_effort?: "low" | "medium" | "high";
  reasoning_budget_tokens?: number;
}
