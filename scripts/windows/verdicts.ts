import type { Observation, ScenarioError } from "../../test/windows/observations.ts";
import { SCENARIOS } from "../../test/windows/observations.ts";
import {
  type Check,
  check,
  judgeCli,
  judgeConformance,
  judgeEof,
  judgeProbe,
  judgeReap,
  judgeSession,
  judgeSeveral,
  judgeTerminate,
  type LinuxFacts,
} from "./checks.ts";
import { judgePaths } from "./path-checks.ts";

/**
 * The Windows suite's verdict over a run (checks.ts holds each scenario's checks). Checks the
 * issue already names as broken on Windows are KNOWN: they print as FAIL with the reason and do
 * not fail the run (unless --strict); one that passes is flagged for taking off the list.
 */

export type { Check, LinuxFacts };

/**
 * Failing today under Wine for the reasons an issue names; flip them as the fixes land. Empty
 * since child mode's exit line stops llama-server politely on Windows (shutdown and stdin's end
 * took 8.2 s before it: the polite stop never reached a Windows child).
 */
export const KNOWN: Record<string, string> = {};

/** Every check of a run: one list per scenario, a failure for a scenario that threw or never reported. */
export function judge(lines: (Observation | ScenarioError)[], facts: LinuxFacts): Check[] {
  const checks: Check[] = [];
  for (const name of SCENARIOS) {
    const line = lines.find((l) => l.scenario === name);
    if (!line || "error" in line) {
      checks.push(
        check(
          `${name}.ran`,
          `the ${name} scenario ran`,
          false,
          line ? line.error : "no observation from the host",
        ),
      );
      continue;
    }
    checks.push(...judgeOne(line, facts));
  }
  checks.push(
    check(
      "suite.nothing_left",
      "no llama-server.exe or MCP server of this run is left once the host exits",
      facts.leftoverProcesses.length === 0,
      facts.leftoverProcesses,
    ),
  );
  return checks;
}

function judgeOne(o: Observation, facts: LinuxFacts): Check[] {
  switch (o.scenario) {
    case "probe":
      return judgeProbe(o);
    case "conformance":
      return judgeConformance(o);
    case "cli":
      return judgeCli(o, facts);
    case "session":
      return judgeSession(o, facts);
    case "eof":
      return judgeEof(o);
    case "terminate":
      return judgeTerminate(o);
    case "several":
      return judgeSeveral(o);
    case "reap":
      return judgeReap(o);
    case "paths":
      return judgePaths(o);
  }
}

export interface Report {
  lines: string[];
  passed: number;
  known: number;
  unexpected: number;
  /** Known failures that passed: the KNOWN list should lose them. */
  flip: string[];
  exitCode: number;
}

/** The printed verdict; exit 1 for an unexpected failure (with `strict`, for any failure). */
export function report(checks: Check[], strict = false, known: Record<string, string> = KNOWN): Report {
  const lines: string[] = [];
  let passed = 0;
  let knownFailed = 0;
  let unexpected = 0;
  const flip: string[] = [];
  for (const c of checks) {
    const seen = c.seen ? `\n        seen: ${c.seen.slice(0, 600)}` : "";
    if (c.ok) {
      passed++;
      if (known[c.id]) flip.push(c.id);
      lines.push(
        `PASS  ${c.id}  ${c.what}${known[c.id] ? "  [listed as a known failure: remove it from KNOWN]" : ""}`,
      );
    } else if (known[c.id]) {
      knownFailed++;
      lines.push(`FAIL  ${c.id}  ${c.what}  [known: ${known[c.id]}]${seen}`);
    } else {
      unexpected++;
      lines.push(`FAIL  ${c.id}  ${c.what}${seen}`);
    }
  }
  const failed = unexpected > 0 || (strict && knownFailed > 0);
  return { lines, passed, known: knownFailed, unexpected, flip, exitCode: failed ? 1 : 0 };
}
