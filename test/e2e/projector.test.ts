import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The vision projector from the compiled binary against the llama-server stand-in
// (docs/models.md "The projector"): found beside the model and launched with --mmproj; one that
// cannot serve its model answered as model_plan_error before llama-server is ever started
// (recordings 105b–105d: it would exit).

function setMmproj(dir: string, value: string): void {
  const file = join(dir, "config.yaml");
  writeFileSync(
    file,
    readFileSync(file, "utf8").replace("  context: 2048\n", `  context: 2048\n  mmproj: ${value}\n`),
  );
}

const argvOf = (log: string): string[] => (existsSync(log) ? readFileSync(log, "utf8").split("\n") : []);

describe.skipIf(process.platform === "win32")("the projector (compiled core, stand-in)", () => {
  test("mmproj: auto beside the model: --mmproj in argv, vision in plan and status", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const stack = writeStack(dir.path, {
      script: [{ content: "seen" }],
      knobs: { FAKE_LLAMA_ARGV_LOG: argvLog },
    });
    const proj = writeGguf(dir.path, "mmproj-model-f16.gguf", mmproj());
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const plan = await core.request({ id: "p", method: "plan" });
    expect(plan.result.plan).toMatchObject({
      vision: true,
      projector: { path: proj, width: 64, model_width: 64 },
    });
    expect(plan.result.plan.argv).toContain("--mmproj");
    const chat = await core.request({ id: "c", method: "chat", params: { input: "hi" } }, 20_000);
    expect(chat.type).toBe("result");
    const argv = argvOf(argvLog);
    expect(argv[argv.indexOf("--mmproj") + 1]).toBe(proj);
    const status = (await core.request({ id: "s", method: "status" })).result;
    expect(status.models[0]).toMatchObject({ name: "default", vision: true });
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 30_000);

  test("a projector of another width: plan and chat answer model_plan_error naming it and both widths; llama-server never starts", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const stack = writeStack(dir.path, { knobs: { FAKE_LLAMA_ARGV_LOG: argvLog } });
    const wide = writeGguf(dir.path, "wide-mmproj.gguf", mmproj({ width: 128 }));
    setMmproj(dir.path, "./wide-mmproj.gguf");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const data = { projector: wide, problem: "width_mismatch", projector_width: 128, model_width: 64 };
    const plan = await core.request({ id: "p", method: "plan" });
    expect(plan).toMatchObject({ type: "error", code: "model_plan_error", data });
    const chat = await core.request({ id: "c", method: "chat", params: { input: "hi" } }, 20_000);
    expect(chat).toMatchObject({ type: "error", code: "model_plan_error", data });
    expect(chat.message).toContain(wide);
    expect(existsSync(argvLog)).toBe(false);
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 30_000);

  test("models.load of an entry whose projector is a text model (105d): model_plan_error naming it", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      extraYaml: "models:\n  - name: v\n    path: ./model.gguf\n    mmproj: ./model.gguf\n",
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const load = await core.request({ id: "l", method: "models.load", params: { model: "v" } }, 20_000);
    expect(load).toMatchObject({
      type: "error",
      code: "model_plan_error",
      data: { projector: join(dir.path, "model.gguf"), problem: "not_projector", model_width: 64 },
    });
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 30_000);

  test("a projector deleted while loaded: the next start is a plan error naming it", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { script: [{ content: "one" }, { content: "two" }] });
    const proj = writeGguf(dir.path, "mmproj.gguf", mmproj());
    setMmproj(dir.path, "./mmproj.gguf");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    expect((await core.request({ id: "c1", method: "chat", params: { input: "one" } }, 20_000)).type).toBe(
      "result",
    );
    const pid = (await core.request({ id: "s1", method: "status" })).result.llama.pid as number;
    rmSync(proj);
    process.kill(pid, "SIGKILL");
    let n = 0;
    expect(
      await waitUntil(() => {
        core.send({ id: `w${++n}`, method: "status" });
        return core.messages.some((m) => m.type === "result" && m.result?.llama?.state === "failed");
      }, 10_000),
    ).toBe(true);
    const c2 = await core.request({ id: "c2", method: "chat", params: { input: "two" } }, 20_000);
    expect(c2).toMatchObject({
      type: "error",
      code: "model_plan_error",
      data: { projector: proj, problem: "absent" },
    });
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 40_000);
});
