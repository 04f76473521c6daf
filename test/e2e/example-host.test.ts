import { beforeAll, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { clientBuilt } from "../client/client-built.ts";
import { hostBinary } from "../client/host-binary.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Runs examples/node-host/index.mjs with Node against the compiled core, as a host developer
// would: once with no config (the cancel demo uses test.sleep), once with a config whose
// llama.binary is the llama-server stand-in (a real streamed chat and a cancelled one).
const ROOT = join(import.meta.dir, "../..");
const node = Bun.which("node");

beforeAll(async () => {
  hostBinary();
  await clientBuilt();
}, 60_000);

async function runExample(cwd: string, env: Record<string, string | undefined>) {
  const proc = Bun.spawn([node!, join(ROOT, "examples/node-host/index.mjs")], {
    cwd,
    env: { ...process.env, LOCAL_AI_TEST_METHODS: "1", ...env },
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
  return { stdout, summary };
}

describe.skipIf(!node)("examples/node-host", () => {
  test("without a config: initializes, diagnoses, cancels test.sleep and shuts down", async () => {
    await using dir = tmpdir();
    // The host's working folder is not its choice (a terminal in a downloaded folder): the core
    // ran its config.yaml's llama.binary at doctor and made data/ there. It runs in the binary's.
    writeFileSync(join(dir.path, "evil.sh"), `#!/bin/sh\ntouch "${join(dir.path, "ran")}"\n`, {
      mode: 0o755,
    });
    writeFileSync(join(dir.path, "config.yaml"), "llama: { binary: ./evil.sh }\n");
    const { summary } = await runExample(dir.path, { LOCAL_AI_EXAMPLE_CONFIG: undefined });
    expect(summary.doctor.checks).toContain("config:fail");
    expect(existsSync(join(dir.path, "ran"))).toBe(false);
    expect(existsSync(join(dir.path, "data"))).toBe(false);
    expect(summary.chat).toBeNull();
    expect(summary.cancel).toEqual({ method: "test.sleep", caught: true, outcome: "cancelled" });
  }, 90_000);

  test.skipIf(process.platform === "win32")(
    "with the llama-server stand-in: a streamed chat, a cancelled chat, shutdown",
    async () => {
      await using dir = tmpdir();
      // Slow tokens, so the cancel lands while the second chat is still streaming.
      const stack = writeStack(dir.path, { knobs: { FAKE_LLAMA_CHUNK_DELAY_MS: "100" } });
      const { stdout, summary } = await runExample(dir.path, {
        ...stack.env,
        LOCAL_AI_EXAMPLE_CONFIG: join(dir.path, "config.yaml"),
        LOCAL_AI_EXAMPLE_INPUT: "hello there",
      });
      // The stand-in echoes the message when it has no script.
      expect(summary.chat.response).toBe("You said: hello there");
      expect(stdout).toContain("chat: You said: hello there");
      expect(summary.cancel).toEqual({ method: "chat", caught: true, outcome: "cancelled" });
      expect(stack.recordedServers()).toEqual([]); // shutdown stopped llama-server
    },
    90_000,
  );
});
