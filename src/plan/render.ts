import type { PlanReport } from "../protocol/plan.ts";
import { terminalSafe } from "../util/terminal-text.ts";

/**
 * The human view of a plan: the model in one line, a bar per device showing how its available
 * memory splits into weights, KV cache, compute and free, then each flag with its reason.
 */

const ESC = "\u001b[";
const paint = (on: boolean, code: string, s: string) => (on ? `${ESC}${code}m${s}${ESC}0m` : s);

export function formatBytes(n: number): string {
  const abs = Math.abs(n);
  if (abs >= 2 ** 30) return `${(n / 2 ** 30).toFixed(abs >= 10 * 2 ** 30 ? 1 : 2)} GiB`;
  if (abs >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${Math.round(n / 1024)} KiB`;
}

const BAR = 40;

function bar(parts: { n: number; ch: string; color: string }[], whole: number, color: boolean): string {
  let used = 0;
  let out = "";
  for (const p of parts) {
    const cells = Math.min(
      BAR - used,
      Math.max(p.n > 0 ? 1 : 0, Math.round((p.n / Math.max(1, whole)) * BAR)),
    );
    used += cells;
    out += paint(color, p.color, p.ch.repeat(cells));
  }
  return out + " ".repeat(Math.max(0, BAR - used));
}

export function renderPlan(report: PlanReport, color: boolean): string {
  // The model's name, architecture and paths are the file's text: shown, never obeyed.
  const { model: m, plan } = terminalSafe(report);
  const lines: string[] = [];
  const params =
    m.parameters >= 1e9 ? `${(m.parameters / 1e9).toFixed(1)}B` : `${(m.parameters / 1e6).toFixed(1)}M`;
  lines.push(
    paint(color, "1", `Model  ${m.name ?? m.path}`),
    `       ${m.architecture}${m.known_architecture ? "" : " (unknown architecture)"}, ${params} params, ${m.file_type}, ` +
      `${m.layers} layers, trained context ${m.context_train}, ${formatBytes(m.size_bytes)} on disk` +
      (m.files.length > 1 ? `, ${m.files.length} shards` : ""),
    "",
  );
  lines.push(
    `Memory  ${paint(color, "34", "█")} weights  ${paint(color, "35", "▓")} KV cache  ${paint(color, "33", "▒")} compute+output  ` +
      `${paint(color, "36", "▚")} RAM prompt cache  ${paint(color, "31", "▞")} projector  ${paint(color, "32", "░")} free  ${paint(color, "2", "·")} kept free`,
  );
  for (const d of plan.devices) {
    const u = d.usage;
    const whole = Math.max(d.available_bytes, u.total + d.margin_bytes);
    const free = Math.max(0, d.free_after_bytes);
    const b = bar(
      [
        { n: u.weights, ch: "█", color: "34" },
        { n: u.kv_cache, ch: "▓", color: "35" },
        { n: u.compute + u.output, ch: "▒", color: "33" },
        { n: u.cache_ram, ch: "▚", color: "36" },
        { n: u.projector, ch: "▞", color: "31" },
        { n: free, ch: "░", color: "32" },
        { n: d.margin_bytes, ch: "·", color: "2" },
      ],
      whole,
      color,
    );
    const label = `${d.id}`.padEnd(5);
    lines.push(
      `  ${label} [${b}] ${formatBytes(u.total)} of ${formatBytes(d.budget_bytes)}` +
        (d.unified ? " (unified)" : "") +
        (d.endpoint ? ` ${paint(color, "36", `(remote: ${d.endpoint})`)}` : ""),
      `        ${d.name}: weights ${formatBytes(u.weights)}, KV ${formatBytes(u.kv_cache)}, ` +
        `compute ${formatBytes(u.compute)}, output ${formatBytes(u.output)}, ` +
        (u.cache_ram > 0 ? `RAM prompt cache ${formatBytes(u.cache_ram)}, ` : "") +
        (u.projector > 0 ? `projector ${formatBytes(u.projector)}, ` : "") +
        `${u.layers} layers; ` +
        `${formatBytes(free)} left, ${formatBytes(d.margin_bytes)} kept free`,
    );
  }
  const leftOut = plan.workers.filter((w) => w.status === "left_out");
  if (leftOut.length > 0) {
    lines.push("", "RPC workers left out");
    for (const w of leftOut) lines.push(`  ${paint(color, "33", "✗")} ${w.endpoint}: ${w.reason}`);
  }
  lines.push("", "Flags");
  for (const d of plan.decisions) {
    const flags = d.flags.length ? d.flags.join(" ") : "(none)";
    const src = d.source === "config" ? paint(color, "36", "config") : paint(color, "2", "auto  ");
    lines.push(`  ${flags.padEnd(38)} ${src}  ${d.reason}`);
  }
  const t = plan.chat_template;
  const thinking = t.thinking === null ? "unknown" : t.thinking ? "yes" : "no";
  lines.push("", `Template  thinking: ${thinking}  ${paint(color, "2", t.reason)}`);
  const p = plan.projector;
  if (p) {
    const most = p.image_tokens_max === null ? "" : `, one image at most ${p.image_tokens_max} tokens`;
    lines.push(
      `Vision    ${p.path}: projector ${p.projector_type} (${p.file_type}), width ${p.width}, ` +
        `${formatBytes(p.weights_bytes + p.compute_bytes)} on ${p.device}; images ${p.image_tokens === "fixed" ? "of a fixed size" : "by size"}${most}`,
    );
  }
  if (plan.warnings.length) {
    lines.push("", "Warnings");
    for (const w of plan.warnings) lines.push(`  ${paint(color, "33", "!")} ${w}`);
  }
  lines.push(
    "",
    "Command",
    `  llama-server ${plan.argv.map(quote).join(" ")} --host 127.0.0.1 --port <free> (key via env)`,
  );
  return lines.join("\n") + "\n";
}

function quote(a: string): string {
  return /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`;
}
