import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { buildClient, CLIENT_DIST } from "../../scripts/build-client.ts";
import { hostBinary } from "../client/host-binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Runs examples/node-host/index.mjs with Node against the compiled core, as a host developer
// would. The chat part runs when LOCAL_AI_EXAMPLE_CONFIG names a config (e.g. one whose
// llama.binary is the llama-server stand-in); otherwise it is skipped and the cancel demo uses
// the core's test.sleep.
const ROOT = join(import.meta.dir, "../..");
const node = Bun.which("node");
// Resolved here: the example runs in a temp folder, where a relative path would mean something else.
const exampleConfig = process.env.LOCAL_AI_EXAMPLE_CONFIG
  ? resolve(process.env.LOCAL_AI_EXAMPLE_CONFIG)
  : undefined;

beforeAll(async () => {
  hostBinary();
  if (!existsSync(join(CLIENT_DIST, "index.mjs"))) await buildClient();
}, 60_000);

describe.skipIf(!node)("examples/node-host", () => {
  test("initializes, diagnoses, cancels and shuts down the compiled core", async () => {
    if (!exampleConfig) console.error("example-host: chat part skipped (LOCAL_AI_EXAMPLE_CONFIG not set)");
    await using dir = tmpdir();
    const env: Record<string, string | undefined> = {
      ...process.env,
      LOCAL_AI_TEST_METHODS: "1",
      LOCAL_AI_EXAMPLE_CONFIG: exampleConfig,
    };
    const proc = Bun.spawn([node!, join(ROOT, "examples/node-host/index.mjs")], {
      cwd: dir.path,
      env,
      stdout: "pipe",
      stderr: "pipe",
    });
    const timer = setTimeout(() => proc.kill(), 60_000);
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    clearTimeout(timer);
    expect({ code, stderr: code === 0 ? "" : stderr }).toEqual({ code: 0, stderr: "" });
    const line = stdout.split("\n").find((l) => l.startsWith("SUMMARY "));
    expect(line).toBeDefined();
    const summary = JSON.parse(line!.slice("SUMMARY ".length));
    expect(summary.initialize.protocol_version).toBe(1);
    expect(summary.initialize.methods).toContain("doctor");
    expect(summary.doctor.checks.length).toBeGreaterThan(0);
    expect(summary.shutdown.exited).toBe(true);
    if (exampleConfig) {
      expect(summary.chat.response.length).toBeGreaterThan(0);
      expect(stdout).toContain(summary.chat.response.slice(0, 10));
      // A short reply may finish before the cancel lands; either way the two must agree.
      expect(summary.cancel.method).toBe("chat");
      expect(summary.cancel.caught).toBe(summary.cancel.outcome === "cancelled");
      expect(["cancelled", "finished before the cancel arrived"]).toContain(summary.cancel.outcome);
    } else {
      expect(summary.chat).toBeNull();
      expect(summary.cancel).toEqual({ method: "test.sleep", caught: true, outcome: "cancelled" });
    }
  }, 90_000);
});
