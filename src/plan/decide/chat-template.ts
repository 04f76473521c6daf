import { templateThinks } from "../../llama/chat-template.ts";
import type { ChatTemplateReport } from "../../protocol/plan.ts";
import { llamaFlagName } from "../argv.ts";

/**
 * The chat template llama-server will apply and whether it lets the model think
 * (docs/agent.md#thinking-and-structured-output): `--chat-template-file` or `--chat-template` in
 * llama.extra_args win (they come last; of the two, the later), else the GGUF's
 * `tokenizer.chat_template`. Pure: the file is read by the caller (launch.ts).
 */

/**
 * The last value of `name` in the args (`--flag value` or `--flag=value`), its `_` spelling too
 * (argv.ts `llamaFlagName`: llama-server reads `--chat_template_file` as `--chat-template-file`),
 * and where it is.
 */
function lastValue(args: readonly string[], name: string): { value: string; at: number } | undefined {
  let found: { value: string; at: number } | undefined;
  args.forEach((raw, i) => {
    if (llamaFlagName(raw) !== name) return;
    const eq = raw.indexOf("=");
    if (eq > 0) found = { value: raw.slice(eq + 1), at: i };
    else if (i + 1 < args.length) found = { value: args[i + 1] as string, at: i };
  });
  return found;
}

/**
 * The template file extra_args name, which the plan reads to judge it; none when a
 * `--chat-template` comes after it: both set the one template llama-server applies, the later wins.
 */
export function templateFileOf(extraArgs: readonly string[]): string | undefined {
  const file = lastValue(extraArgs, "--chat-template-file");
  const inline = lastValue(extraArgs, "--chat-template");
  return file && !(inline && inline.at > file.at) ? file.value : undefined;
}

/** A template file as read for the plan: its text, or why it could not be read. */
export type TemplateFile = { path: string; text: string } | { path: string; problem: string };

export function chatTemplateReport(
  modelTemplate: string | null | undefined,
  extraArgs: readonly string[],
  file?: TemplateFile,
): ChatTemplateReport {
  const verdict = (text: string) =>
    templateThinks(text)
      ? "it opens a think block: the model reasons first (think controls it)"
      : "it has no think block";
  const path = templateFileOf(extraArgs);
  if (path !== undefined) {
    if (!file || file.path !== path || !("text" in file))
      return {
        source: "file",
        thinking: null,
        reason: `--chat-template-file ${path} (llama.extra_args) could not be read${file && "problem" in file ? `: ${file.problem}` : ""}`,
      };
    if (file.text !== "")
      return {
        source: "file",
        thinking: templateThinks(file.text),
        reason: `--chat-template-file ${path} (llama.extra_args): ${verdict(file.text)}`,
      };
  }
  // An empty template, the winning flag's, is none: llama-server takes the model's own
  // (common_chat_templates_init), where the text had been judged as having no think block.
  const inline = path === undefined ? lastValue(extraArgs, "--chat-template")?.value : undefined;
  if (inline)
    return {
      source: "inline",
      thinking: templateThinks(inline),
      reason: `--chat-template (llama.extra_args): ${verdict(inline)}`,
    };
  if (!modelTemplate)
    return {
      source: "none",
      thinking: false,
      reason: "the model has no chat template (llama-server uses chatml)",
    };
  return {
    source: "model",
    thinking: templateThinks(modelTemplate),
    reason: `the model's own template: ${verdict(modelTemplate)}`,
  };
}
