import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { REAL_MODELS_DIR } from "../fixtures/shared.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Opt-in: the compiled core and a real llama-server with llama.cpp's own tiny vision pair
// (docs/models.md "The projector"): `mmproj: auto` finds the one projector beside the model,
// the server loads it, and its /props says vision (recording 100). Needs
// LOCAL_AI_TEST_LLAMA_SERVER and the shared models (LOCAL_AI_SHARED_DIR).
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
const MODEL = join(REAL_MODELS_DIR, "tiny-vision.gguf");
const have = (name: string) => existsSync(join(REAL_MODELS_DIR, name));

/** The running llama-server's port (its command line) and key (its environment: src/runtime/child-env.ts). */
function endpointOf(pid: number): { url: string; key: string | undefined } {
  const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  const port = args[args.indexOf("--port") + 1];
  const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  const key = env.find((e) => e.startsWith("LLAMA_API_KEY="))?.slice("LLAMA_API_KEY=".length);
  return { url: `http://127.0.0.1:${port}`, key };
}

async function props(pid: number): Promise<{ modalities?: { vision: boolean } }> {
  const { url, key } = endpointOf(pid);
  const res = await fetch(`${url}/props`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  const body = await res.text();
  if (!res.ok) throw new Error(`/props: ${res.status} ${body.slice(0, 200)}`);
  return JSON.parse(body) as { modalities?: { vision: boolean } };
}

async function serve(projector: string): Promise<{ argv: string[] }> {
  await using dir = tmpdir();
  // Only the pair in the folder: auto takes the only projector beside the model.
  copyFileSync(MODEL, join(dir.path, "tiny-vision.gguf"));
  copyFileSync(join(REAL_MODELS_DIR, projector), join(dir.path, `mmproj-${projector}`));
  writeFileSync(
    join(dir.path, "config.yaml"),
    [
      `llama: { binary: ${JSON.stringify(BINARY)}, startup_timeout_s: 120 }`,
      "model: { path: ./tiny-vision.gguf, context: 2048, mmproj: auto }",
    ].join("\n"),
  );
  await using core = spawnCore({ cwd: dir.path });
  const plan = (await core.request({ id: "p", method: "plan" }, 30_000)).result.plan;
  expect(plan.vision).toBe(true);
  expect(plan.argv[plan.argv.indexOf("--mmproj") + 1]).toBe(join(dir.path, `mmproj-${projector}`));
  const warm = await core.request({ id: "w", method: "warmup" }, 180_000);
  expect(warm.result).toMatchObject({ status: "ready" });
  const status = (await core.request({ id: "s", method: "status" })).result;
  expect(status.models[0].vision).toBe(true);
  expect((await props(status.llama.pid)).modalities?.vision).toBe(true);
  await core.request({ id: "bye", method: "shutdown" }, 30_000);
  expect(await core.exited(30_000)).toBe(0);
  return plan;
}

if (!BINARY || !have("tiny-vision.gguf") || !have("tiny-vision-mmproj.gguf")) {
  test.skip("real llama-server with a projector: set LOCAL_AI_TEST_LLAMA_SERVER (and LOCAL_AI_SHARED_DIR) to run (skipped)", () => {});
} else {
  describe("the compiled core with a real llama-server and a projector", () => {
    test("mmproj: auto beside tiny-vision.gguf: loaded, and /props says vision", async () => {
      await serve("tiny-vision-mmproj.gguf");
    }, 300_000);

    test("the pixtral projector: --image-max-tokens is passed, and llama-server takes it", async () => {
      const plan = await serve("tiny-vision-mmproj-pixtral.gguf");
      expect(plan.argv[plan.argv.indexOf("--image-max-tokens") + 1]).toBe("256");
    }, 300_000);
  });
}
