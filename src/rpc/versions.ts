import type { WorkerReport } from "./client.ts";
import { versionText } from "./wire.ts";

/**
 * llama-server accepts only workers of its own RPC major version, and which one that is cannot
 * be asked of it before it starts. What can be seen is workers that disagree: the major most
 * of them speak (the first listed on a tie) is taken as the reference, and the others are
 * named with the reason. (A version llama-server itself refused is learned at its start; see
 * `checkWorkers`.)
 */
export function versionOutliers(reports: readonly WorkerReport[]): Map<string, string> {
  const answered = reports.filter((r): r is Extract<WorkerReport, { ok: true }> => r.ok);
  const votes = new Map<number, number>();
  for (const r of answered) votes.set(r.version.major, (votes.get(r.version.major) ?? 0) + 1);
  if (votes.size < 2) return new Map();
  let reference = answered[0]!.version.major;
  for (const [major, n] of votes) if (n > (votes.get(reference) ?? 0)) reference = major;
  const others = answered.find((r) => r.version.major === reference)!;
  const out = new Map<string, string>();
  for (const r of answered) {
    if (r.version.major === reference) continue;
    out.set(
      r.endpoint,
      `speaks RPC protocol v${versionText(r.version)} while ${others.endpoint} speaks v${versionText(others.version)}: one llama-server accepts one major version only`,
    );
  }
  return out;
}
