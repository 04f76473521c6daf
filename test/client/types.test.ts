import { beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLIENT_DIST } from "../../scripts/build-client.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { clientBuilt } from "./client-built.ts";

// The built dist/client's declarations as a host's tsc sees them: strict, skipLibCheck off, and
// first with neither @types/node nor the DOM library (a host that has not installed them must
// not meet errors inside our .d.ts), then as an Electron main process (with both) that passes
// its own process.env, AbortSignal and child_process.spawn. Each `@ts-expect-error` line must
// fail to compile, or tsc reports it unused.
const ROOT = join(import.meta.dir, "../..");

beforeAll(async () => {
  await clientBuilt();
}, 120_000);

const HOST = `import {
  LocalAiClient,
  isLocalAiError,
  resolveCoreBinary,
  type AbortSignalLike,
  type AnyLocalAiError,
  type ModelsLoadResult,
  type PlanResult,
  type SessionSummary,
  type SessionsGetResult,
  type StoredMessage,
  type UsersDeleteResult,
  type WarmupEvent,
} from "@local-ai/client";

// A host's own functions over conversations name their types (they were not exported).
export const titles = (list: SessionSummary[]): string[] => list.map((s) => s.title);
export const texts = (messages: StoredMessage[]): string[] => messages.map((m) => m.content ?? "");
export async function transcript(client: LocalAiClient, id: string): Promise<string[]> {
  const got: SessionsGetResult = await client.sessions.get({ session_id: id });
  const erased: UsersDeleteResult = await client.users.delete({});
  return [...texts(got.messages), String(Object.keys(erased).length)];
}

export async function host(signal: AbortSignalLike): Promise<string[]> {
  const out: string[] = [];
  const client = await LocalAiClient.start({
    binary: resolveCoreBinary({ resourcesPath: "/app/resources" }),
    env: { LOCAL_AI_LOG_LEVEL: "debug" },
  });
  // info is set once start() has resolved: no "possibly undefined" under strict.
  out.push(client.info.server.version, String(client.info.capabilities.parallel_chat.max_concurrent));
  const again = await new LocalAiClient({ binary: "x" }).start();
  out.push(again.info.capabilities.methods.join());

  const plan = await client.plan({ signal, timeoutMs: 1000 });
  out.push(String(plan.fits), plan.plan.argv.join(" "), String(plan.model.layers));
  // @ts-expect-error PlanResult is a typed object: a misspelt field does not compile
  out.push(String(plan.fitz));
  const named: PlanResult = await client.plan({ model: "qwen3-8b", timeoutMs: 1000 }, { signal });
  out.push(named.plan.model_path);
  // @ts-expect-error plan's first argument is \`model\` and the call options: a misspelt key does not compile
  await client.plan({ modle: "qwen3-8b" });

  const listing = await client.models();
  out.push(String(listing.models.length));
  const load = client.models.load({ model: "qwen3-8b", pin: true }, { signal });
  for await (const ev of load) if (ev.phase === "waiting_for_memory") out.push(ev.models.join());
  const loaded: ModelsLoadResult = await load.result;
  out.push(loaded.state, String(loaded.memory_bytes));
  const unloaded = await client.models.unload({ model: loaded.model, force: true });
  out.push(String(unloaded.unloaded));
  // @ts-expect-error models.load needs its model
  client.models.load({ pin: true });

  const warm = client.warmup({ user_id: "u1" });
  for await (const ev of warm) {
    if (ev.phase === "starting") out.push(String(ev.attempt));
    else out.push(String(ev.elapsed_ms));
    // @ts-expect-error warmup events are typed, not GenericEvent
    out.push(String(ev.bogus));
  }
  const ready = await warm.result;
  out.push(ready.status, String(ready.slots));
  const progress: WarmupEvent["event"] = "warmup_progress";
  out.push(progress);

  try {
    await client.chat({ input: "hi" }).result;
  } catch (err) {
    if (isLocalAiError(err, "config_invalid")) {
      const line: number | null | undefined = err.data?.line;
      out.push(String(line), err.data?.issues?.[0]?.key ?? "");
    }
    if (isLocalAiError(err, "config_missing") && err.data) out.push(err.data.file);
    // The reasons the docs name for invalid_request and cancelled are comparable (the type said
    // invalid_request's reason could only be "context_overflow").
    if (isLocalAiError(err, "invalid_request") && err.data?.reason === "session_not_found") out.push("gone");
    if (isLocalAiError(err, "invalid_request") && err.data?.reason === "model_not_vision") out.push("text");
    if (isLocalAiError(err, "cancelled") && err.data?.reason === "session_deleted") out.push("deleted");
    // @ts-expect-error a reason the core never sends does not compile
    if (isLocalAiError(err, "invalid_request") && err.data?.reason === "session_not_fuond") out.push("typo");
    if (isLocalAiError(err, "core_exited") && err.data) {
      const tail: string[] = err.data.stderr_tail;
      out.push(String(err.data.exit_code), tail.join("\\n"));
      // @ts-expect-error core_exited data has no such typed field as a number
      const wrong: number = err.data.stderr_tail;
      out.push(String(wrong));
    }
    if (isLocalAiError(err)) {
      const any: AnyLocalAiError = err;
      if (any.code === "model_missing") out.push(any.data?.problem ?? "");
      // An hf: model not pulled: its problem and the command that fetches it are typed.
      if (any.code === "model_missing" && any.data?.problem === "not_downloaded") out.push(any.data.pull ?? "");
      if (any.code === "internal_error") out.push(any.data?.reason ?? "");
    }
  }
  await client.close();
  return out;
}
`;

const ELECTRON_MAIN = `import { spawn } from "node:child_process";
import { LocalAiClient, resolveCoreBinary } from "@local-ai/client";

export async function main(): Promise<void> {
  const controller = new AbortController();
  const client = await LocalAiClient.start({
    binary: resolveCoreBinary({ resourcesPath: process.resourcesPath ?? "", dev: !process.resourcesPath }),
    env: process.env,
    spawn,
  });
  const chat = client.chat({ input: "hi" }, { signal: controller.signal });
  controller.abort();
  await chat.result.catch(() => undefined);
  await client.close({ timeoutMs: 1000 });
}
declare global {
  namespace NodeJS {
    interface Process {
      resourcesPath?: string;
    }
  }
}
`;

async function typecheck(files: Record<string, string>, compilerOptions: Record<string, unknown>) {
  await using dir = tmpdir();
  mkdirSync(join(dir.path, "node_modules/@local-ai"), { recursive: true });
  symlinkSync(CLIENT_DIST, join(dir.path, "node_modules/@local-ai/client"), "dir");
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir.path, name), text);
  writeFileSync(
    join(dir.path, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        skipLibCheck: false,
        noEmit: true,
        module: "node16",
        moduleResolution: "node16",
        target: "es2022",
        ...compilerOptions,
      },
      files: Object.keys(files),
    }),
  );
  const tsc = Bun.spawnSync([join(ROOT, "node_modules/.bin/tsc"), "-p", dir.path], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return { output: tsc.stdout.toString() + tsc.stderr.toString(), exitCode: tsc.exitCode };
}

describe("dist/client declarations", () => {
  test("strict, skipLibCheck off, without @types/node or the DOM library", async () => {
    const r = await typecheck({ "host.ts": HOST, "host.mts": HOST }, { lib: ["es2022"], types: [] });
    expect(r.output).toBe("");
    expect(r.exitCode).toBe(0);
  }, 120_000);

  test("an Electron main process passes Node's own env, AbortSignal and spawn", async () => {
    const r = await typecheck(
      { "main.ts": ELECTRON_MAIN },
      {
        lib: ["es2022", "dom"],
        types: ["node"],
        typeRoots: [join(ROOT, "node_modules/@types")],
        // Our declarations were checked in full above, and they declare nothing global that
        // could meet Node's or the DOM's; main.ts, checked in full, shows Node's values fit
        // them. Checking @types/node and lib.dom themselves was two thirds of this test.
        skipLibCheck: true,
      },
    );
    expect(r.output).toBe("");
    expect(r.exitCode).toBe(0);
    // What lets skipLibCheck stand above: nothing global to clash with Node's or the DOM's.
    const types = join(CLIENT_DIST, "types");
    const files = [...new Bun.Glob("**/*.d.ts").scanSync(types)];
    expect(files.length).toBeGreaterThan(5);
    for (const f of files)
      expect(readFileSync(join(types, f), "utf8")).not.toMatch(/declare (global|module)/);
  }, 120_000);

  test("a mistake in a host is reported, so the checks above can fail", async () => {
    const r = await typecheck(
      {
        "bad.ts": `import { LocalAiClient } from "@local-ai/client";\nexport const x = (c: LocalAiClient) => c.warmup({ user_id: 42 });\n`,
      },
      { lib: ["es2022"], types: [] },
    );
    expect(r.exitCode).not.toBe(0);
    expect(r.output).toContain("bad.ts(2,");
    expect(r.output).toContain("not assignable to type 'string'");
  }, 120_000);
});
