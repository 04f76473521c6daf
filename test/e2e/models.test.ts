import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, ensureBinary, spawnCore } from "../fixtures/core-process.ts";
import { startRangeServer } from "../fixtures/range-server.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "../models/cache-layout.ts";

// Issue 12 items 5-7 from the compiled binary: hf: model paths, the models listing, and plan
// judging a model still on the hub, each against a cache the test lays out.
const onPosix = process.platform !== "win32";

/** Runs the binary without blocking this process (the hub stand-in answers from here). */
async function run(args: string[], cwd: string, env: Record<string, string>) {
  ensureBinary();
  const proc = Bun.spawn([BINARY, ...args], {
    cwd,
    env: { ...process.env, LOCAL_AI_LOG_LEVEL: "info", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code, stdout, stderr };
}

const stops: (() => void)[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s();
});

describe.skipIf(!onPosix)("models and hf: paths through the compiled binary", () => {
  test("models --json lists the laid-out cache and the config's folder, fitting first", async () => {
    await using dir = tmpdir();
    const cache = join(dir.path, "hub");
    layRepo(cache, "org/m", {
      "m-Q4_K_M.gguf": tinyModel(),
      "m-F16.gguf": tinyModel(1),
      "m-Q8_0.gguf": null,
    });
    mkdirSync(join(dir.path, "models"));
    writeFileSync(join(dir.path, "models", "broken.gguf"), "nope");
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/m:Q4_K_M\n");
    const env = { HF_HUB_CACHE: cache, HF_HUB_OFFLINE: "1" };

    const json = await run(["models", "--json"], dir.path, env);
    expect(json.code).toBe(0);
    const result = JSON.parse(json.stdout);
    expect(result.cache_dir).toBe(cache);
    const files = result.models.map((m: { file: string }) => m.file);
    expect(files.slice(0, 2)).toEqual(["m-F16.gguf", "m-Q4_K_M.gguf"]);
    expect(result.models.slice(0, 2).map((m: { fits: boolean }) => m.fits)).toEqual([true, true]);
    expect(result.models.find((m: { file: string }) => m.file === "m-Q4_K_M.gguf")).toMatchObject({
      configured: true,
      quantization: "Q4_K_M",
      model_path: "hf:org/m:m-Q4_K_M.gguf",
    });
    expect(result.models.find((m: { file: string }) => m.file === "m-Q8_0.gguf")).toMatchObject({
      fits: null,
      problem: "broken_link",
    });

    const human = await run(["models"], dir.path, env);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain("✓ Q4_K_M");
    expect(human.stdout).toContain("model.path: hf:org/m:m-Q4_K_M.gguf");
  });

  test("chat with an hf: model that is not pulled: model_missing naming the pull command; doctor says the same", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { script: [{ content: "hello" }] });
    const yaml = readFileSync(join(dir.path, "config.yaml"), "utf8").replace(
      /^ {2}path: .*$/m,
      "  path: hf:org/absent:Q4_K_M",
    );
    writeFileSync(join(dir.path, "config.yaml"), yaml);
    const cache = join(dir.path, "hub");
    await using core = spawnCore({ cwd: dir.path, env: { ...stack.env, HF_HUB_CACHE: cache } });
    const r = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
    expect(r).toMatchObject({ type: "error", code: "model_missing" });
    expect(r.message).toContain("local-ai pull org/absent:Q4_K_M");
    expect(r.data).toMatchObject({ pull: "local-ai pull org/absent:Q4_K_M", problem: "not_downloaded" });

    const doctor = await run(["doctor", "--json"], dir.path, { HF_HUB_CACHE: cache });
    expect(doctor.code).toBe(1);
    const model = JSON.parse(doctor.stdout).checks.find((c: { id: string }) => c.id === "model");
    expect(model).toMatchObject({ status: "fail", fix: "fetch it with: local-ai pull org/absent:Q4_K_M" });

    // Once the model is in the cache, the same config chats.
    layRepo(cache, "org/absent", { "a-Q4_K_M.gguf": tinyModel() });
    const ok = await core.request({ id: 2, method: "chat", params: { input: "hi" } }, 30_000);
    expect(ok).toMatchObject({ type: "result", result: { response: "hello" } });
  });

  test("plan --model hf:… judges a model still on the hub; offline it names the pull command", async () => {
    await using dir = tmpdir();
    const served = join(dir.path, "served");
    mkdirSync(served);
    const { writeGguf } = await import("../fixtures/gguf-writer.ts");
    const file = writeGguf(served, "r-Q4_K_M.gguf", tinyModel());
    const hub = startRangeServer({ repos: { "org/r": { files: { "r-Q4_K_M.gguf": file } } } });
    stops.push(() => hub.stop());
    const env = { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") };

    const plan = await run(["plan", "--json", "--model", "hf:org/r:Q4_K_M"], dir.path, env);
    expect(plan.stderr).toBe("");
    expect(plan.code).toBe(0);
    const report = JSON.parse(plan.stdout);
    expect(report.plan.warnings[0]).toStartWith("not downloaded; judged from the hub's header");
    expect(hub.requests.some((r) => r.range !== null)).toBe(true);

    const offline = await run(["plan", "--model", "hf:org/r:Q4_K_M"], dir.path, {
      ...env,
      HF_HUB_OFFLINE: "1",
    });
    expect(offline.code).toBe(1);
    expect(offline.stderr).toContain("model_missing");
    expect(offline.stderr).toContain("local-ai pull org/r:Q4_K_M");
  });
});
