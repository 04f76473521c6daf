import { terminalJson, terminalSafe } from "../util/terminal-text.ts";
import type { CheckStatus, DoctorReport } from "./doctor.ts";

/**
 * The human view of a doctor report: a table (status, check, message), the fix under each
 * check that needs one, colours only when the output is a terminal.
 */

const ESC = "\u001b[";
const LABEL: Record<CheckStatus, { text: string; color: string }> = {
  ok: { text: " ok ", color: "32" },
  warn: { text: "warn", color: "33" },
  fail: { text: "FAIL", color: "31;1" },
  skip: { text: "skip", color: "2" },
};

export function renderDoctor(given: DoctorReport, color = false): string {
  // Messages quote files and tools (a GGUF's architecture, a device's name): shown, never obeyed.
  const report = terminalSafe(given);
  const paint = (code: string, s: string) => (color ? `${ESC}${code}m${s}${ESC}0m` : s);
  const width = Math.max(8, ...report.checks.map((c) => c.id.length));
  const lines = [
    `${"".padEnd(6)} ${"check".padEnd(width)}  result`,
    `${"".padEnd(6)} ${"-".repeat(width)}  ------`,
  ];
  for (const c of report.checks) {
    const l = LABEL[c.status];
    lines.push(`[${paint(l.color, l.text)}] ${c.id.padEnd(width)}  ${c.message}`);
    if (c.fix && c.status !== "ok" && c.status !== "skip")
      lines.push(`${"".padEnd(6)} ${"".padEnd(width)}  ${paint("2", `fix: ${c.fix}`)}`);
  }
  const fails = report.checks.filter((c) => c.status === "fail").length;
  const warns = report.checks.filter((c) => c.status === "warn").length;
  const skips = report.checks.filter((c) => c.status === "skip").length;
  const notChecked = skips ? ` (${skips} not checked)` : "";
  lines.push(
    "",
    report.ok
      ? paint("32", `No failures${warns ? ` (${warns} warning${warns > 1 ? "s" : ""})` : ""}.`)
      : paint("31;1", `${fails} check${fails > 1 ? "s" : ""} failed${notChecked}.`),
  );
  return lines.join("\n") + "\n";
}

/** `doctor --json`: the report as JSON, what it quotes escaped as the table's (util/terminal-text.ts). */
export function renderDoctorJson(report: DoctorReport): string {
  return `${terminalJson(report, 2)}\n`;
}
