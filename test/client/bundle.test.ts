import { beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLIENT_DIST } from "../../scripts/build-client.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { clientBuilt } from "./client-built.ts";
import { hostBinary } from "./host-binary.ts";

// The built client as a host sees it: plain Node, CommonJS or ESM, typed without zod.
const ROOT = join(import.meta.dir, "../..");
const node = Bun.which("node");

beforeAll(async () => {
  await clientBuilt();
}, 60_000);

describe("dist/client", () => {
  test("is small and carries neither zod nor Bun APIs", () => {
    const js = readFileSync(join(CLIENT_DIST, "index.mjs"), "utf8");
    expect(statSync(join(CLIENT_DIST, "index.mjs")).size).toBeLessThan(100 * 1024);
    expect(js).not.toContain("Bun.");
    expect(js).not.toMatch(/from\s*["']zod["']/);
    expect(js).toContain("class LocalAiClient");
  });

  test.skipIf(!node)(
    "require() from CommonJS in Node talks to the compiled core",
    () => {
      const script = `
      const { LocalAiClient, LocalAiError } = require(${JSON.stringify(join(CLIENT_DIST, "index.cjs"))});
      (async () => {
        const client = await LocalAiClient.start({ binary: ${JSON.stringify(hostBinary())} });
        const pong = await client.ping();
        const err = await client.request("no.such").catch((e) => e);
        await client.shutdown();
        process.stdout.write(JSON.stringify({ pong, code: err.code, typed: err instanceof LocalAiError }));
      })();`;
      const run = Bun.spawnSync([node!, "-e", script], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
      expect(run.stderr.toString()).toBe("");
      expect(JSON.parse(run.stdout.toString())).toEqual({
        pong: { status: "ok" },
        code: "unknown_method",
        typed: true,
      });
    },
    30_000,
  );

  test.skipIf(!node)("isLocalAiError holds for an error of the other build loaded beside it", () => {
    // The exports map hands import() index.mjs and require() index.cjs: a host (or a library of
    // its) using both has two LocalAiError classes, and instanceof told one's errors from the
    // other's as none at all (Node's "dual package hazard").
    const script = `
      const { createRequire } = await import("node:module");
      const esm = await import(${JSON.stringify(join(CLIENT_DIST, "index.mjs"))});
      const cjs = createRequire(${JSON.stringify(join(CLIENT_DIST, "index.cjs"))})(${JSON.stringify(join(CLIENT_DIST, "index.cjs"))});
      const err = await new esm.LocalAiClient({ binary: "local-ai" }).ping().catch((e) => e);
      const back = new cjs.LocalAiError("timeout", "t");
      process.stdout.write(JSON.stringify({
        code: err.code,
        two: esm.LocalAiError !== cjs.LocalAiError,
        cjs: [cjs.isLocalAiError(err), cjs.isLocalAiError(err, "core_exited"), cjs.isLocalAiError(err, "timeout")],
        esm: [esm.isLocalAiError(back), esm.isLocalAiError(back, "timeout"), esm.isLocalAiError(new Error("x"))],
      }));`;
    const run = Bun.spawnSync([node!, "--input-type=module", "-e", script], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(run.stderr.toString()).toBe("");
    expect(JSON.parse(run.stdout.toString())).toEqual({
      code: "core_exited",
      two: true,
      cjs: [true, true, false],
      esm: [true, true, false],
    });
  });

  test("its declarations type-check CommonJS and ESM hosts outside this repo, without zod", async () => {
    await using dir = tmpdir();
    // Installed as a host would: the folder under node_modules, resolved through its exports map.
    mkdirSync(join(dir.path, "node_modules/@local-ai"), { recursive: true });
    symlinkSync(CLIENT_DIST, join(dir.path, "node_modules/@local-ai/client"), "dir");
    const host = `import { LocalAiClient, type ChatEvent, isLocalAiError } from "@local-ai/client";
export async function run(client: LocalAiClient): Promise<string> {
  const chat = client.chat({ input: "hi", user_id: "u1" });
  let text = "";
  for await (const ev of chat) if (ev.event === "llm_chunk") text += ev.delta;
  const result = await chat.result;
  const checks = (await client.doctor()).checks.map((c) => c.status);
  const e: ChatEvent["event"] = "final";
  try { await client.plan(); } catch (err) { if (isLocalAiError(err, "model_plan_error")) text += err.data?.needed; }
  return text + result.response + result.dropped_events + checks.join() + e;
}
// @ts-expect-error a wrong param type must not compile
export const bad = (c: LocalAiClient) => c.chat({ input: 42 });
`;
    // The same host as a CommonJS file (host.ts, no "type": "module") and as an ES module.
    writeFileSync(join(dir.path, "host.ts"), host);
    writeFileSync(join(dir.path, "host.mts"), host);
    writeFileSync(
      join(dir.path, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: "node16",
          moduleResolution: "node16",
          target: "es2022",
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules/@types")],
          // The declarations themselves are checked in full in types.test.ts; here the hosts
          // are, and checking @types/node and lib.dom again was most of this test's time.
          skipLibCheck: true,
        },
        files: ["host.ts", "host.mts"],
      }),
    );
    const tsc = Bun.spawnSync([join(ROOT, "node_modules/.bin/tsc"), "-p", dir.path], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(tsc.stdout.toString() + tsc.stderr.toString()).toBe("");
    expect(tsc.exitCode).toBe(0);
  }, 60_000);
});
