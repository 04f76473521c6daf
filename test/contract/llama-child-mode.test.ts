import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { RECORDINGS } from "./recordings.ts";

// llama-server as a router's child, the stand-in against the recording
// test/fixtures/llama-server/transcripts/90-child-mode-supervision.txt: state lines on stdout, exit
// on stdin's EOF (at once when ready, when the load ends during a load), the exit line.

const PREFIX = "cmd_child_to_router:state:";
type Json = Record<string, any>;

/** The recording's cases: each one's state lines (parsed) and its exit code. */
function recordedCases(): Map<string, { states: Json[]; exitCode: number | undefined }> {
  const text = readFileSync(join(RECORDINGS, "transcripts", "90-child-mode-supervision.txt"), "utf8");
  const cases = new Map<string, { states: Json[]; exitCode: number | undefined }>();
  for (const part of text.split("## case: ").slice(1)) {
    const name = part.slice(0, part.indexOf("\n")).trim();
    // A long line may be cut short in the recording ("created …"): its state still counts.
    const states = [...part.matchAll(/stdout: cmd_child_to_router:state:(.*)$/gm)].map((m) => {
      const raw = m[1] as string;
      try {
        return JSON.parse(raw) as Json;
      } catch {
        return { state: /"state":"(\w+)"/.exec(raw)?.[1], payload: { cut: true } };
      }
    });
    const code = /exit code (\d+)/.exec(part)?.[1];
    cases.set(name, { states, exitCode: code === undefined ? undefined : Number(code) });
  }
  return cases;
}

const RECORDED = recordedCases();
const recorded = (name: string) => {
  const c = RECORDED.get(name);
  if (!c) throw new Error(`transcripts/90 has no case "${name}"`);
  return c;
};

/** The state lines' shape: the states in order and, for loading, the payload's keys and stages. */
const shape = (states: Json[]) =>
  states.map((s) =>
    s.state === "loading"
      ? { state: s.state, stages: s.payload.stages, current: s.payload.current }
      : { state: s.state, payload: s.payload === null ? null : "the model's card" },
  );

interface Child {
  proc: ReturnType<typeof Bun.spawn>;
  states: Json[];
  /** Every stdout line that is not a state line. */
  other: string[];
  stderr(): string;
  port: number;
}

let dir: ReturnType<typeof tmpdir> | undefined;
const children: Child[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    c.proc.kill("SIGKILL");
    await c.proc.exited;
  }
  await dir?.[Symbol.asyncDispose]();
  dir = undefined;
});

async function startChild(
  opts: { knobs?: Record<string, string>; args?: string[]; env?: Record<string, string> } = {},
): Promise<Child> {
  dir ??= tmpdir();
  const binary = writeFakeLlamaServer(dir.path, { FAKE_LLAMA_LOAD_MS: "100", ...opts.knobs });
  const model = writeFakeModel(dir.path);
  const port = await pickFreePort();
  const proc = Bun.spawn(
    [
      binary,
      "-m",
      model,
      "-np",
      "1",
      "-c",
      "512",
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      ...(opts.args ?? []),
    ],
    {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: process.env.PATH ?? "", LLAMA_SERVER_ROUTER_PORT: "1", ...opts.env },
    },
  );
  const child: Child = { proc, states: [], other: [], stderr: () => err, port };
  let err = "";
  void (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      const lines = buf.split("\n");
      buf = lines.pop() ?? "";
      for (const line of lines) {
        if (line.startsWith(PREFIX)) child.states.push(JSON.parse(line.slice(PREFIX.length)));
        else child.other.push(line);
      }
    }
  })();
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>)
      err += new TextDecoder().decode(chunk);
  })();
  children.push(child);
  return child;
}

async function healthy(port: number, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const res = await fetch(`http://127.0.0.1:${port}/health`).catch(() => null);
    if (res?.status === 200) return true;
    await Bun.sleep(20);
  }
  return false;
}

const ready = (c: Child) => waitFor(() => c.states.some((s) => s.state === "ready"), { timeoutMs: 10_000 });
const exitWithin = async (c: Child, ms: number) =>
  Promise.race([c.proc.exited, Bun.sleep(ms).then(() => "still running" as const)]);

describe.skipIf(process.platform === "win32")("the stand-in as a router's child (transcripts/90)", () => {
  test("state lines as recorded: loading from 0.0 to 1.0, then ready with the model card; nothing else on stdout (90: stdin EOF after ready)", async () => {
    const c = await startChild();
    expect(await ready(c)).toBe(true);
    const want = recorded("stdin EOF after ready (the parent died)");
    expect(shape(c.states)).toEqual(shape(want.states));
    expect(c.states[0]?.payload.value).toBe(0);
    expect(c.states.at(-2)?.payload.value).toBe(1);
    expect(Object.keys(c.states.at(-1)?.payload.meta).sort()).toEqual(
      Object.keys(want.states.at(-1)?.payload.meta).sort(),
    );
    expect(c.other).toEqual([]);
  });

  test("stdin's EOF once ready: it exits at once with code 1 (90: stdin EOF after ready)", async () => {
    const c = await startChild();
    expect(await ready(c)).toBe(true);
    (c.proc.stdin as import("bun").FileSink).end();
    expect(await exitWithin(c, 1000)).toBe(
      recorded("stdin EOF after ready (the parent died)").exitCode as number,
    );
    expect(c.stderr()).toContain("EOF on stdin detected, forcing shutdown...");
  });

  test("the exit line: a clean stop, code 0 (90: exit command on stdin)", async () => {
    const c = await startChild();
    expect(await ready(c)).toBe(true);
    const stdin = c.proc.stdin as import("bun").FileSink;
    stdin.write("cmd_router_to_child:exit\n");
    stdin.flush();
    expect(await exitWithin(c, 2000)).toBe(recorded("exit command on stdin").exitCode as number);
    expect(c.stderr()).toContain("exit command received, exiting...");
  });

  test("stdin's EOF during the load is seen when the load ends: code 1, not before (90: stdin EOF while still loading)", async () => {
    const c = await startChild({ knobs: { FAKE_LLAMA_LOAD_MS: "700" } });
    await waitFor(() => c.states.length > 0, { timeoutMs: 5000 });
    const t0 = Date.now();
    (c.proc.stdin as import("bun").FileSink).end();
    expect(await exitWithin(c, 300)).toBe("still running");
    expect(await exitWithin(c, 3000)).toBe(recorded("stdin EOF while still loading").exitCode as number);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
  });

  test("idle sleep and the wake are pushed: sleeping, loading again, ready with no card (90: --sleep-idle-seconds 1, then a chat)", async () => {
    const c = await startChild({ args: ["--sleep-idle-seconds", "1"] });
    expect(await ready(c)).toBe(true);
    expect(await waitFor(() => c.states.some((s) => s.state === "sleeping"), { timeoutMs: 5000 })).toBe(true);
    const res = await fetch(`http://127.0.0.1:${c.port}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    });
    expect(res.status).toBe(200);
    await res.text();
    await waitFor(() => c.states.filter((s) => s.state === "ready").length === 2, { timeoutMs: 5000 });
    const want = recorded(
      "--sleep-idle-seconds 1, then a chat (sleeping and waking are pushed as state lines)",
    );
    // The states in order, each run of loading lines taken as one (how many depends on the load's
    // length).
    const runs = (states: Json[]) =>
      shape(states).filter((s, i, all) => i === 0 || JSON.stringify(s) !== JSON.stringify(all[i - 1]));
    expect(runs(c.states).slice(0, 5)).toEqual(runs(want.states).slice(0, 5));
    expect(c.states.at(-1)).toEqual({ state: "ready", payload: null });
  });

  test("without a pipe on stdin it reads EOF at once: it exits as soon as it is ready (server-models.cpp server_child::setup)", async () => {
    dir ??= tmpdir();
    const binary = writeFakeLlamaServer(dir.path, { FAKE_LLAMA_LOAD_MS: "50" });
    const port = await pickFreePort();
    const proc = Bun.spawn([binary, "-m", writeFakeModel(dir.path), "--port", String(port)], {
      stdin: "ignore",
      stdout: "ignore",
      stderr: "ignore",
      env: { PATH: process.env.PATH ?? "", LLAMA_SERVER_ROUTER_PORT: "1" },
    });
    expect(await Promise.race([proc.exited, Bun.sleep(3000).then(() => "still running")])).toBe(1);
  });

  test("a build before child mode (FAKE_LLAMA_NO_CHILD_MODE): no state lines, stdin's EOF changes nothing", async () => {
    const c = await startChild({ knobs: { FAKE_LLAMA_NO_CHILD_MODE: "1" } });
    expect(await healthy(c.port)).toBe(true);
    (c.proc.stdin as import("bun").FileSink).end();
    expect(await exitWithin(c, 500)).toBe("still running");
    expect(c.states).toEqual([]);
  });
});
