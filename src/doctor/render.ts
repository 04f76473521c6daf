import type { DoctorReport } from "./doctor.ts";

const MARK = { ok: "ok  ", warn: "warn", fail: "FAIL" } as const;

/** The human view of a doctor report: one line per check, its fix indented below. */
export function renderDoctor(report: DoctorReport): string {
  const lines = report.checks.flatMap((c) => {
    const head = `[${MARK[c.status]}] ${c.id.padEnd(12)} ${c.message}`;
    return c.fix && c.status !== "ok" ? [head, `       ${"".padEnd(12)} fix: ${c.fix}`] : [head];
  });
  lines.push("", report.ok ? "No failures." : "Some checks failed.");
  return lines.join("\n") + "\n";
}
