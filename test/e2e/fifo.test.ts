import { describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BINARY, ensureBinary, spawnCore } from "../fixtures/core-process.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "../models/cache-layout.ts";

// Issue 19 item 4 from the compiled binary: a FIFO (no writer ever opens it) where the core
// reads a model, a ref or a blob. A read that blocks would hang the command, and in
// serve-stdio the whole core (ping, shutdown and SIGTERM unanswered): each run here has a
// deadline, so a blocking read fails the test instead of hanging it.
const onPosix = process.platform !== "win32";

function mkfifo(path: string): string {
  const r = Bun.spawnSync(["mkfifo", path]);
  if (r.exitCode !== 0) throw new Error(`mkfifo ${path}: ${r.stderr.toString()}`);
  return path;
}

/** Runs the binary with a deadline: a blocked read shows as `killed`, never as a hung test. */
async function run(args: string[], cwd: string, env: Record<string, string> = {}) {
  ensureBinary();
  const proc = Bun.spawn([BINARY, ...args], {
    cwd,
    env: { ...process.env, LOCAL_AI_LOG_LEVEL: "info", NO_COLOR: "1", ...env },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 10_000,
    killSignal: "SIGKILL",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { code: proc.signalCode ? `killed by ${proc.signalCode}` : code, stdout, stderr };
}

function withModelPath(dir: string, path: string): void {
  const file = join(dir, "config.yaml");
  writeFileSync(file, readFileSync(file, "utf8").replace(/^ {2}path: .*$/m, `  path: ${path}`));
}

describe.skipIf(!onPosix)("a FIFO where a model should be (compiled binary)", () => {
  test("plan, doctor and models answer model_missing 'not a regular file' instead of hanging", async () => {
    await using dir = tmpdir();
    writeStack(dir.path);
    const fifo = mkfifo(join(dir.path, "pipe.gguf"));
    withModelPath(dir.path, fifo);

    const plan = await run(["plan", "--json"], dir.path);
    expect(plan.code).toBe(1);
    const planError = JSON.parse(plan.stdout).error;
    expect(planError).toMatchObject({ code: "model_missing", data: { path: fifo } });
    expect(planError.message).toContain("not a regular file (a FIFO)");

    const doctor = await run(["doctor", "--json"], dir.path);
    expect(doctor.code).toBe(1);
    const model = JSON.parse(doctor.stdout).checks.find((c: { id: string }) => c.id === "model");
    expect(model.status).toBe("fail");
    expect(model.message).toContain("not a regular file (a FIFO)");

    const models = await run(["models", "--json"], dir.path, { HF_HUB_CACHE: join(dir.path, "hub") });
    expect(models.code).toBe(0);
    const entry = JSON.parse(models.stdout).models.find((m: { path: string }) => m.path === fifo);
    expect(entry).toMatchObject({ fits: null, problem: "unreadable" });
    expect(entry.verdict).toContain("not a regular file (a FIFO)");
  }, 40_000);

  test("serve-stdio: initialize, plan, doctor, models and chat answer; ping, status and shutdown still do", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { script: [{ content: "never" }] });
    const fifo = mkfifo(join(dir.path, "pipe.gguf"));
    withModelPath(dir.path, fifo);
    await using core = spawnCore({
      cwd: dir.path,
      env: { ...stack.env, HF_HUB_CACHE: join(dir.path, "hub") },
    });
    // initialize reads the model ahead once idle: the first place a blocking read would stop the core.
    const init = await core.request({ id: "i", method: "initialize" });
    expect(init.type).toBe("result");
    await Bun.sleep(300);
    expect((await core.request({ id: "p0", method: "ping" })).result).toEqual({ status: "ok" });

    for (const method of ["plan", "chat"]) {
      const r = await core.request(
        { id: method, method, ...(method === "chat" ? { params: { input: "hi" } } : {}) },
        15_000,
      );
      expect(r).toMatchObject({ type: "error", code: "model_missing" });
      expect(r.message).toContain("not a regular file (a FIFO)");
    }
    const doctor = await core.request({ id: "d", method: "doctor" }, 15_000);
    const check = doctor.result.checks.find((c: { id: string }) => c.id === "model");
    expect(check).toMatchObject({ status: "fail" });
    expect(check.message).toContain("not a regular file (a FIFO)");
    const models = await core.request({ id: "m", method: "models" }, 15_000);
    expect(models.result.models.find((m: { path: string }) => m.path === fifo)).toMatchObject({
      problem: "unreadable",
    });

    expect((await core.request({ id: "p1", method: "ping" })).result).toEqual({ status: "ok" });
    expect((await core.request({ id: "s", method: "status" })).result.requests).toEqual([]);
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 60_000);

  test("the Hugging Face cache: a FIFO as refs/main, as a snapshot's blob; plan and models answer", async () => {
    await using dir = tmpdir();
    const cache = join(dir.path, "hub");
    // A ref that is a FIFO: broken, not "never pulled", and never read.
    const byRef = layRepo(cache, "org/ref", { "r-Q4_K_M.gguf": tinyModel() });
    rmSync(join(byRef.root, "refs", "main"));
    mkfifo(join(byRef.root, "refs", "main"));
    // A snapshot entry whose blob is a FIFO.
    const byBlob = layRepo(cache, "org/blob", { "b-Q4_K_M.gguf": "placeholder" });
    const blob = join(byBlob.root, "blobs", readdirOne(join(byBlob.root, "blobs")));
    rmSync(blob);
    mkfifo(blob);
    mkdirSync(join(dir.path, "empty"));
    const env = { HF_HUB_CACHE: cache, HF_HUB_OFFLINE: "1" };

    writeFileSync(join(dir.path, "empty", "config.yaml"), "model:\n  path: hf:org/ref:Q4_K_M\n");
    const ref = await run(["plan", "--json"], join(dir.path, "empty"), env);
    expect(ref.code).toBe(1);
    const refError = JSON.parse(ref.stdout).error;
    expect(refError).toMatchObject({ code: "model_missing", data: { problem: "broken_ref" } });
    expect(refError.message).toContain("not a regular file (a FIFO)");

    writeFileSync(join(dir.path, "empty", "config.yaml"), "model:\n  path: hf:org/blob:Q4_K_M\n");
    const viaBlob = await run(["plan", "--json"], join(dir.path, "empty"), env);
    expect(viaBlob.code).toBe(1);
    const blobError = JSON.parse(viaBlob.stdout).error;
    expect(blobError.code).toBe("model_missing");
    expect(blobError.message).toContain("not a regular file (a FIFO)");

    const models = await run(["models", "--json"], join(dir.path, "empty"), env);
    expect(models.code).toBe(0);
    const listed = JSON.parse(models.stdout).models;
    expect(listed.find((m: { repo: string }) => m.repo === "org/blob")).toMatchObject({
      fits: null,
      problem: "unreadable",
    });
  }, 40_000);
});

function readdirOne(dir: string): string {
  const names = readdirSync(dir);
  if (names.length !== 1) throw new Error(`${dir}: expected one entry, got ${names.join(", ")}`);
  return names[0]!;
}
