import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { b64, png } from "../fixtures/images.ts";
import { writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A GGUF a chat names by path has its own projector (`auto`), as `plan {model}` and the `models`
// listing judge it (docs/models.md "Which key"): the model section's `mmproj: none` is its own
// model's setting, and a chat with images on the other model was refused model_not_vision.

describe.skipIf(process.platform === "win32")(
  "a chat's model by path and its projector (compiled core)",
  () => {
    test("the section's mmproj none: the path's vision model reads the chat's image", async () => {
      await using dir = tmpdir();
      const stack = writeStack(dir.path, {
        script: [{ content: "seen" }],
        tools: [],
        extraYaml: "models:\n  - {name: second, path: ./model.gguf}\n",
      });
      const file = join(dir.path, "config.yaml");
      writeFileSync(
        file,
        readFileSync(file, "utf8").replace("  context: 2048\n", "  context: 2048\n  mmproj: none\n"),
      );
      mkdirSync(join(dir.path, "vis"));
      const vision = writeFakeModel(join(dir.path, "vis"), "v.gguf");
      writeGguf(join(dir.path, "vis"), "mmproj-v-f16.gguf", mmproj());
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const plan = await core.request({ id: "p", method: "plan", params: { model: vision } });
      expect(plan.result.plan.vision).toBe(true);
      const chat = await core.request(
        {
          id: "c",
          method: "chat",
          params: { model: vision, input: "look", images: [{ data: b64(png(2, 2)) }] },
        },
        20_000,
      );
      expect(chat).toMatchObject({ type: "result", result: { model: vision } });
      await core.request({ id: "bye", method: "shutdown" });
      expect(await core.exited()).toBe(0);
    }, 30_000);
  },
);
