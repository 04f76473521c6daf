import { spawnCore } from "../fixtures/core-process.ts";
import { runCommand } from "./host-tools.ts";
import type { CliObservation, ConformanceObservation, HostPlan } from "./observations.ts";

/** The protocol over real Windows pipes, no llama-server needed; and the CLI's JSON commands. */

export async function conformance(plan: HostPlan): Promise<ConformanceObservation> {
  await using core = spawnCore({ binary: plan.core, cwd: plan.emptyDir });
  await core.request({ id: 1, method: "initialize", params: { protocol_versions: [1] } });
  await core.request({ id: 2, method: "ping" });
  core.write('{"id":3,"method":\n');
  core.write('{"id":4,"method":"no.such.method"}\n');
  core.write('{"id":"crlf","method":"ping"}\r\n');
  // A second request reusing an id still in flight is refused; the first one lives on.
  core.send({ id: "dup", method: "test.sleep", params: { ms: 20_000 } });
  core.send({ id: "dup", method: "test.sleep", params: { ms: 10 } });
  const terminals = (id: string) => core.messages.filter((m) => m.id === id && m.type !== "event");
  await core.waitFor(() => terminals("dup").length >= 1 && terminals("crlf").length >= 1);
  await core.request({ id: 5, method: "cancel", params: { request_id: "dup" } });
  await core.waitFor(() => terminals("dup").length >= 2);
  await core.request({ id: 6, method: "shutdown" });
  const exitCode = await core.exited(15_000);
  return {
    scenario: "conformance",
    messages: core.messages.filter((m) => m.type !== "event"),
    exitCode,
    nonJsonLines: core.rawLines.filter((l) => !isJson(l)),
  };
}

function isJson(line: string): boolean {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
}

export async function cli(plan: HostPlan): Promise<CliObservation> {
  return {
    scenario: "cli",
    version: await runCommand([plan.core, "--version"], plan.stackDir),
    doctor: await runCommand([plan.core, "doctor", "--json", "--config", plan.config], plan.stackDir),
    plan: await runCommand([plan.core, "plan", "--json", "--config", plan.config], plan.stackDir),
  };
}
