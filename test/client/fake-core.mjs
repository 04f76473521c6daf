// A scripted stand-in for the core, for the client's bad-input tests: each method name picks a
// behaviour the real core never shows (garbage lines, broken messages, sudden exits, silence).
import { spawn } from "node:child_process";
import { appendFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";

const out = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
if (process.env.FAKE_CORE_LAUNCHES) appendFileSync(process.env.FAKE_CORE_LAUNCHES, `${process.pid}\n`);
if (process.env.FAKE_CORE_DIE_AT_START === "1") {
  process.stderr.write("fake core: refusing to start\n");
  process.exit(7);
}

// FAKE_CORE_CHILD_GRACE_MS: like the real core with a llama-server that ignores SIGTERM, it
// starts a child that ignores SIGTERM and, on shutdown or end of input, stops it politely, kills
// it after the grace, and only then answers and exits. The child's pid goes to FAKE_CORE_CHILD_PID
// once its SIGTERM handler is in place.
const childGraceMs = Number(process.env.FAKE_CORE_CHILD_GRACE_MS ?? 0);
let child;
if (childGraceMs > 0) {
  const script = "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000);";
  child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "ignore"] });
  child.stdout.once("data", () => writeFileSync(process.env.FAKE_CORE_CHILD_PID, String(child.pid)));
}
let stopping;
const stopChild = () =>
  (stopping ??= new Promise((resolve) => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", resolve);
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), childGraceMs);
  }));

const hanging = new Map();
/** Embeds and searches answered only as their cancel arrives (the answer first): see sessions.search below. */
const crossing = new Set();
/** Unloads answered only after their cancel is refused (see models.unload below). */
const begun = new Map();
// A core that ignores shutdown and end of input, so the client has to kill it.
if (process.env.FAKE_CORE_IGNORE_SHUTDOWN === "1") setInterval(() => {}, 1000);
const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const req = JSON.parse(line);
  const { id, method, params } = req;
  switch (method) {
    case "initialize":
      return out({
        id,
        type: "result",
        result: {
          protocol_version: 1,
          server: { name: "fake-core", version: "0.0.0" },
          capabilities: {
            parallel_chat: { supported: false, max_concurrent: 1 },
            cancel: { targeted: true },
            methods: [],
            events: [],
          },
        },
      });
    case "embed":
    case "sessions.search":
      // An embed that runs until cancelled, as a big batch does; a search, as a LIKE match over years of chats.
      if (params.input === "hang" || params.query === "hang") return void hanging.set(id, method);
      // An embed or a search whose answer crosses the host's cancel: written just before the cancel is read.
      if (params.input === "crossing" || params.query === "crossing") return void crossing.add(id);
      return out({ id, type: "result", result: { method, params } });
    case "hanging":
      return out({ id, type: "result", result: { ids: [...hanging.keys()] } });
    case "plan":
    case "models.load":
    case "models.unload":
      // A plan, a load or an unload that runs until cancelled (a slow hub header, a wait for
      // memory, an unload's path on a drive that does not answer).
      if (params.model === "hang") return void hanging.set(id, method);
      // An unload that had begun as its cancel came: `{cancelled:false}`, then its result.
      if (params.model === "begun") return void begun.set(id, { method, params });
      if (method === "models.load")
        out({
          id,
          type: "event",
          event: "warmup_progress",
          phase: "waiting_for_memory",
          elapsed_ms: 5,
          models: ["a"],
        });
      return out({ id, type: "result", result: { method, params } });
    case "echo":
    case "models":
    case "documents.list":
    case "documents.delete":
      return out({ id, type: "result", result: { method, params } });
    case "documents.add":
      out({ id, type: "event", event: "index_progress", phase: "reading", done: 1, total: 2 });
      return out({ id, type: "result", result: { method, params } });
    case "garbage":
      process.stdout.write("this is not json {\n");
      process.stdout.write("[1,2,3]\n");
      process.stdout.write('{"no":"type"}\n');
      return out({ id, type: "result", result: { survived: true } });
    case "huge_result":
      // A result line of params.bytes and more: over a small maxLineBytes.
      return out({ id, type: "result", result: { text: "x".repeat(params.bytes) } });
    case "broken_error":
      return out({ id, type: "error" });
    case "broken_result":
      return out({ id, type: "result" });
    case "hang":
      hanging.set(id, method);
      return;
    case "die":
      process.stderr.write("fake core: dying on request\n");
      process.exit(3);
      return;
    case "chat":
      out({
        id,
        type: "event",
        event: "run_start",
        user_input: params.input ?? "",
        trace_id: "t1",
        session_id: "s1",
      });
      // An event this client does not know (warmup_progress became a chat event in issue 11).
      out({ id, type: "event", event: "future_event", percent: 50 });
      for (const delta of ["Hel", "lo"]) out({ id, type: "event", event: "llm_chunk", step: 0, delta });
      if (params.input === "hang") {
        hanging.set(id, "chat");
        return;
      }
      out({ id, type: "event", event: "final", step: 0, response: "Hello" });
      return out({
        id,
        type: "result",
        result: { response: "Hello", session_id: "s1", trace_id: "t1", warnings: [], dropped_events: 0 },
      });
    case "cancel": {
      const target = String(params.request_id);
      const crossed = [...crossing].find((k) => String(k) === target);
      if (crossed !== undefined) {
        crossing.delete(crossed);
        out({ id: crossed, type: "result", result: { hits: [] } });
      }
      const caught = [...hanging.keys()].find((k) => String(k) === target);
      if (caught !== undefined) {
        hanging.delete(caught);
        out({ id: caught, type: "event", event: "loop_abort", step: 0, reason: "cancelled" });
        out({ id: caught, type: "error", code: "cancelled", message: "the request was cancelled" });
      }
      out({ id, type: "result", result: { cancelled: caught !== undefined } });
      const late = [...begun.keys()].find((k) => String(k) === target);
      if (late !== undefined) out({ id: late, type: "result", result: begun.get(late) });
      return void begun.delete(late);
    }
    case "shutdown":
      // The real core answers once its children are stopped.
      return void stopChild().then(() => {
        out({ id, type: "result", result: { status: "ok" } });
        if (process.env.FAKE_CORE_IGNORE_SHUTDOWN === "1") return;
        rl.close();
        process.exitCode = 0;
      });
    default:
      return out({
        id,
        type: "error",
        code: "unknown_method",
        message: `unknown method ${method}`,
        data: { method },
      });
  }
});
rl.on("close", () => {
  if (process.env.FAKE_CORE_IGNORE_SHUTDOWN !== "1") void stopChild().then(() => process.exit(0));
});
