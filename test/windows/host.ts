/**
 * The Windows suite's host: a Windows program (compiled with --target=bun-windows-x64) that
 * drives the Windows build of the core over real Windows pipes, as an Electron app does. Run as
 * `host.exe PLAN.json` (observations.ts); prints one JSON line per scenario on stdout, which the
 * Linux side judges (scripts/test-windows.ts). A scenario that throws prints its error instead.
 */
import { readFileSync } from "node:fs";
import { eof, reap, session, several, terminate } from "./lifecycle-scenarios.ts";
import type { HostPlan, Observation, ScenarioError, ScenarioName } from "./observations.ts";
import { paths } from "./path-scenarios.ts";
import { probe } from "./probe.ts";
import { cli, conformance } from "./protocol-scenarios.ts";

const startedMs = Date.now();
const planFile = process.argv[2];
if (!planFile) {
  process.stderr.write("usage: host.exe PLAN.json\n");
  process.exit(2);
}
const plan = JSON.parse(readFileSync(planFile, "utf8")) as HostPlan;
const wanted = (name: ScenarioName) => !plan.only || plan.only.includes(name);

function print(line: Observation | ScenarioError): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function run<T extends Observation>(name: ScenarioName, scenario: () => Promise<T>): Promise<T | null> {
  if (!wanted(name)) return null;
  try {
    const observed = await scenario();
    print(observed);
    return observed;
  } catch (err) {
    print({ scenario: name, error: String((err as Error)?.stack ?? err).slice(0, 4000) });
    return null;
  }
}

await run("probe", () => probe(plan, startedMs));
await run("conformance", () => conformance(plan));
await run("cli", () => cli(plan));
await run("session", () => session(plan));
await run("eof", () => eof(plan));
await run("terminate", () => terminate(plan));
await run("several", () => several(plan));
await run("reap", () => reap(plan));
await run("paths", () => paths(plan));
process.exit(0);
