#!/usr/bin/env node
// A minimal host for local-ai in plain Node (>= 18): start the core, handshake, diagnose,
// stream a chat, cancel one, shut down. Build first: `npm run build:host` (core + client).
//
//   node examples/node-host/index.mjs
//
// Environment:
//   LOCAL_AI_BINARY          the core (default: dist/local-ai next to this repo)
//   LOCAL_AI_EXAMPLE_CONFIG  a config.yaml with a model and llama-server; the chat part runs only with one
//   LOCAL_AI_EXAMPLE_INPUT   the chat message (default: a short greeting)
//   LOCAL_AI_TEST_METHODS=1  lets the core's test.sleep stand in for a chat in the cancel demo
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { isLocalAiError, LocalAiClient } from "../../dist/client/index.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const exe = process.platform === "win32" ? "local-ai.exe" : "local-ai";
const binary = resolve(process.env.LOCAL_AI_BINARY ?? join(here, "../../dist", exe));
const config = process.env.LOCAL_AI_EXAMPLE_CONFIG;
const summary = { initialize: null, doctor: null, chat: null, cancel: null, shutdown: null };
const say = (line) => process.stdout.write(`${line}\n`);

if (!existsSync(binary)) {
  console.error(`no core at ${binary}: run \`npm run build:host\` or set LOCAL_AI_BINARY`);
  process.exit(2);
}

const client = await LocalAiClient.start({
  binary,
  config,
  // The core's logs go to its stderr; a real host would put them in its own log file.
  onStderr: (line) => process.stderr.write(`[core] ${line}\n`),
  onExit: (info) => {
    if (!info.expected) console.error(`core exited unexpectedly: code ${info.code}, signal ${info.signal}`);
  },
  restart: { maxRestarts: 2 },
});

try {
  // 1. The handshake ran in start(); its answer says what this core can do.
  const info = client.info;
  say(
    `initialize: ${info.server.name} ${info.server.version}, protocol ${info.protocol_version}, methods ${info.capabilities.methods.join(" ")}`,
  );
  summary.initialize = { protocol_version: info.protocol_version, methods: info.capabilities.methods };

  // 2. Diagnostics: a failing check is data, not an exception.
  const report = await client.doctor();
  for (const check of report.checks) say(`doctor: [${check.status}] ${check.id}: ${check.message}`);
  summary.doctor = { ok: report.ok, checks: report.checks.map((c) => `${c.id}:${c.status}`) };

  // 3. A chat with streamed output (needs a config with a model and llama-server).
  if (config) {
    const chat = client.chat({ input: process.env.LOCAL_AI_EXAMPLE_INPUT ?? "Say hello in five words." });
    process.stdout.write("chat: ");
    for await (const event of chat) {
      if (event.event === "llm_chunk") process.stdout.write(event.delta);
      else if (event.event === "tool_start") process.stdout.write(`\n[tool ${event.tool}]\n`);
    }
    const result = await chat.result;
    say(`\nchat: done, session ${result.session_id}, ${result.warnings.length} warning(s)`);
    summary.chat = { response: result.response, session_id: result.session_id };
  } else {
    say("chat: skipped (set LOCAL_AI_EXAMPLE_CONFIG to a config with a model and llama-server)");
  }

  // 4. Cancel: a chat when there is a config, else the core's test.sleep when it serves it.
  const cancellable = config
    ? client.chat({ input: "Count slowly from one to one hundred." })
    : info.capabilities.methods.includes("test.sleep")
      ? client.stream("test.sleep", { ms: 30_000, tick_ms: 100 })
      : undefined;
  if (cancellable) {
    let caught = false;
    for await (const event of cancellable) {
      // Cancel once the work has visibly started. Leaving the loop alone would cancel it too;
      // cancel() also says whether the core caught it in flight.
      if (event.event === "llm_chunk" || event.event === "tick") {
        caught = await cancellable.cancel();
        break;
      }
    }
    const outcome = await cancellable.result.then(
      () => "finished before the cancel arrived",
      (err) => (isLocalAiError(err, "cancelled") ? "cancelled" : `failed: ${err.code}`),
    );
    say(`cancel: ${cancellable.method} ${cancellable.id} -> ${outcome} (caught in flight: ${caught})`);
    summary.cancel = { method: cancellable.method, caught, outcome };
  } else {
    say("cancel: skipped (no config and no test methods)");
  }
} catch (err) {
  console.error(isLocalAiError(err) ? `error ${err.code}: ${err.message}` : err);
  process.exitCode = 1;
} finally {
  // 5. Shutdown: the core cancels what is left, stops llama-server and exits.
  await client.close({ timeoutMs: 5000 });
  say("shutdown: done");
  summary.shutdown = { exited: client.pid === undefined };
  say(`SUMMARY ${JSON.stringify(summary)}`);
}
