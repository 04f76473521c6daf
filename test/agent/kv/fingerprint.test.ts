import { describe, expect, test } from "bun:test";
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { launchFingerprint } from "../../../src/agent/kv/fingerprint.ts";
import { ConfigSchema } from "../../../src/config/schema.ts";
import { parseProps } from "../../../src/llama/props.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// What a saved slot is valid for (docs/agent.md#prompt-reuse). A slot holds the embeddings its
// projector made of each image, and llama-server matches a restored image to the next prompt's
// by the image's bytes alone: restored under another projector (same model, same type and
// shape, other weights), the real server (b10587) answered the next turn from the old
// projector's embeddings, the image counted as cached (cached_tokens covering its 64 tokens).

const llama = ConfigSchema.parse({}).llama;

function setup(dir: string) {
  const model = join(dir, "model.gguf");
  const a = join(dir, "mmproj-a.gguf");
  const b = join(dir, "mmproj-b.gguf");
  writeFileSync(model, "model");
  writeFileSync(a, "projector a");
  writeFileSync(b, "projector b");
  const props = parseProps({
    model_path: model,
    default_generation_settings: { n_ctx: 2048 },
    build_info: "b10587-3f545becc",
  });
  return { props, a, b };
}

describe("launchFingerprint", () => {
  test("another projector, or the same one replaced in place, is another fingerprint", async () => {
    await using dir = tmpdir();
    const { props, a, b } = setup(dir.path);
    const withA = launchFingerprint(props, llama, a);
    expect(withA).toBeDefined();
    expect(launchFingerprint(props, llama, a)).toBe(withA);
    expect(launchFingerprint(props, llama, b)).not.toBe(withA);
    expect(launchFingerprint(props, llama, null)).not.toBe(withA);
    // A new file at the same path (a projector updated where it was): another inode.
    rmSync(a);
    copyFileSync(b, a);
    expect(launchFingerprint(props, llama, a)).not.toBe(withA);
  });

  test("without a projector the fingerprint is what it was; one that cannot be read gives none", async () => {
    await using dir = tmpdir();
    const { props } = setup(dir.path);
    expect(launchFingerprint(props, llama, null)).toBe(launchFingerprint(props, llama));
    expect(launchFingerprint(props, llama, join(dir.path, "gone.gguf"))).toBeUndefined();
  });
});
