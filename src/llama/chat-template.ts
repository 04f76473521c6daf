/**
 * Whether a chat template lets the model think (docs/agent.md#thinking-and-structured-output), read
 * from its text: the markers the templates of current reasoning models use to open, switch off or
 * hand back a think block. llama-server itself decides by rendering the template with thinking on
 * and looking for its start tag (common_chat_templates_support_enable_thinking); the text says the
 * same for the templates in use, without rendering anything.
 */
const THINKING_MARKERS = [
  "<think>", // Qwen3, DeepSeek-R1 and its distills, chatml_think.jinja (test/fixtures/llama-server/transcripts/91)
  // DeepSeek-R1 and its distills as first released: the model opens the block itself, the
  // template only cuts it off earlier answers (and llama-server still parses it out).
  "</think>",
  "enable_thinking", // Qwen3's switch (91c)
  "reasoning_content", // templates that hand earlier thinking back (91f)
  "reasoning_effort", // gpt-oss
  "<|channel|>", // gpt-oss's analysis channel
  "[THINK]", // Magistral
  "<|START_THINKING|>", // Command A Reasoning
  "<seed:think>", // Seed-OSS
];

export function templateThinks(text: string): boolean {
  return THINKING_MARKERS.some((m) => text.includes(m));
}

/**
 * What `/props` says (91h): its caps (a template that renders `reasoning_content` or takes an
 * effort) or its template's text; null when it says neither.
 */
export function propsThinking(
  caps: { supports_preserve_reasoning?: boolean; supports_reasoning_effort?: boolean } | null,
  template: string | null,
): boolean | null {
  if (caps?.supports_preserve_reasoning || caps?.supports_reasoning_effort) return true;
  if (template !== null) return templateThinks(template);
  return null;
}
