import { defineCommand } from "citty";
import { listModelsFor } from "../models/list.ts";
import { formatBytes } from "../plan/render.ts";
import type { LeftOut, ModelsResult } from "../protocol/models.ts";
import { CoreServices } from "../server/services.ts";
import { terminalJson, terminalSafe } from "../util/terminal-text.ts";
import { configArg, jsonArg, requireNamedConfig } from "./args.ts";
import { writeDocument } from "./output.ts";

export default defineCommand({
  meta: {
    name: "models",
    description:
      "List the GGUF models in the Hugging Face cache and beside the config, and whether each fits",
  },
  args: { ...configArg, ...jsonArg },
  run: async ({ args }) => {
    // Without a config the listing is the cache's and the folder's.
    requireNamedConfig(args.config);
    const services = new CoreServices({ configPath: args.config, cwd: process.cwd() });
    const result = await listModelsFor(services);
    const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
    writeDocument(args.json ? `${terminalJson(result, 2)}\n` : renderModels(result, color));
    return 0;
  },
});

const paint = (on: boolean, code: string, s: string) => (on ? `\u001b[${code}m${s}\u001b[0m` : s);

/**
 * One line per model (✓ fits, ✗ does not, ? unreadable; * the configured one; the name the config
 * gives it, docs/models.md "Several models"), then how to use it.
 */
export function renderModels(given: ModelsResult, color: boolean): string {
  // File names and headers from anywhere: shown, never obeyed by the terminal.
  const result = terminalSafe(given);
  if (result.models.length === 0) {
    return (
      `No GGUF models in ${result.cache_dir} or ${result.folders.join(", ")}.\n` +
      leftOutLines(result, color)
        .map((l) => `${l}\n`)
        .join("") +
      "Fetch one with: local-ai pull org/name:Q4_K_M\n"
    );
  }
  const lines: string[] = [];
  for (const m of result.models) {
    const mark =
      m.fits === true
        ? paint(color, "32", "✓")
        : m.fits === false
          ? paint(color, "31", "✗")
          : paint(color, "33", "?");
    const where = `${m.repo ? `${m.repo}  ${m.file}` : m.path}${m.name ? `  (configured as ${m.name})` : ""}`;
    lines.push(
      `${m.configured ? "*" : " "}${mark} ${(m.quantization ?? "-").padEnd(8)} ${formatBytes(m.size_bytes).padStart(10)}  ${where}`,
      `      ${m.fits === null ? paint(color, "33", m.verdict) : m.verdict}`,
    );
    if (m.fits !== null) lines.push(`      ${paint(color, "2", `model.path: ${m.model_path}`)}`);
  }
  lines.push("", paint(color, "2", `Cache ${result.cache_dir}; folders ${result.folders.join(", ")}`));
  lines.push(...leftOutLines(result, color));
  return `${lines.join("\n")}\n`;
}

/** Why a path was left out, as `left_out` says it (docs/models.md "What was left out"). */
const LEFT_OUT_WHY: Record<LeftOut["reason"], string> = {
  no_answer: "its drive did not answer in time (a network drive offline?)",
  unreadable: "it could not be read (permissions?)",
  deadline: "the hub cache ran out of time before it was listed whole",
};

/** Lines of `left_out` printed; the rest are counted (thousands of dead repos scrolled the models away). */
const LEFT_OUT_LINES = 20;

/** One line per path left out of the listing (the first LEFT_OUT_LINES), so a model missing from it says why. */
function leftOutLines(result: ModelsResult, color: boolean): string[] {
  const listed = result.left_out ?? [];
  const lines = listed
    .slice(0, LEFT_OUT_LINES)
    .map((l) => paint(color, "33", `! not listed: ${l.path}: ${LEFT_OUT_WHY[l.reason]}`));
  const rest = Math.max(result.left_out_total ?? listed.length, listed.length) - lines.length;
  if (rest > 0)
    lines.push(paint(color, "33", `! and ${rest} more not listed (--json lists the first ${listed.length})`));
  return lines;
}
