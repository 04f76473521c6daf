import { afterEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { findProjector } from "../../src/models/find-projector.ts";
import { pickProjector } from "../../src/models/pick-file.ts";
import { type PullDeps, pullModel } from "../../src/models/pull.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { denseModel, encodeGguf, F16, type GgufSpec } from "../fixtures/gguf-writer.ts";
import { startHubStandIn, visionRepo } from "../fixtures/hub-stand-in.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// pull brings a vision model's projector (docs/models.md "The projector"), against the hub stand-in.

/** A whole file of the spec: its header, then zeroed tensor data. */
function fileOf(spec: GgufSpec): Uint8Array {
  const { header, totalBytes } = encodeGguf(spec);
  const out = new Uint8Array(totalBytes);
  out.set(header);
  return out;
}

const small = denseModel({
  arch: "llama",
  layers: 1,
  embd: 64,
  heads: 4,
  kvHeads: 2,
  ff: 128,
  vocab: 256,
  ctx: 2048,
  type: F16,
});
const REPO = visionRepo("org/vision-GGUF", {
  model: fileOf(small),
  mmprojF16: fileOf(mmproj()),
  mmprojF32: fileOf(mmproj({ type: 0 })),
});

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

async function setup() {
  const hub = await startHubStandIn([
    REPO,
    { id: "org/text-GGUF", files: [{ path: "text-Q8_0.gguf", content: fileOf(small) }] },
  ]);
  const dir = tmpdir("local-ai-pull-mmproj-");
  open.push(hub, { close: async () => dir[Symbol.dispose]() });
  const cache = join(dir.path, "hub");
  const deps: PullDeps = {
    env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache },
    home: dir.path,
    freeSpace: () => 1024 ** 4,
    pollMs: 50,
    inlineHash: true,
  };
  return { hub, cache, deps };
}

const hooks = () => ({ signal: new AbortController().signal, progress: () => {} });

describe("pull and the projector", () => {
  test("the model and its F16 projector land in one snapshot, where mmproj: auto finds it", async () => {
    const { deps } = await setup();
    const out = await pullModel({ repo: "org/vision-GGUF", revision: "main" }, deps, hooks());
    expect(out.files.map((f) => f.file)).toEqual(["vision-Q8_0.gguf", "mmproj-vision-F16.gguf"]);
    expect(out.path).toEndWith("vision-Q8_0.gguf");
    expect(out.mmproj).toEndWith("mmproj-vision-F16.gguf");
    expect(existsSync(out.mmproj!)).toBe(true);
    // The model's size is the model's: the projector is counted in its own file entry.
    expect(out.size_bytes).toBe(out.files[0]!.size_bytes);
    const model = modelInfo(await readGgufHeader(out.path));
    expect(await findProjector("auto", model)).toMatchObject({ kind: "found", info: { path: out.mmproj } });
  });

  test("a repo without a projector pulls the model alone, mmproj null", async () => {
    const { deps } = await setup();
    const out = await pullModel({ repo: "org/text-GGUF", revision: "main" }, deps, hooks());
    expect(out.files.map((f) => f.file)).toEqual(["text-Q8_0.gguf"]);
    expect(out.mmproj).toBeNull();
  });

  test("naming a projector file pulls that file, and nothing else with it", async () => {
    const { deps } = await setup();
    const out = await pullModel(
      { repo: "org/vision-GGUF", file: "mmproj-vision-F32.gguf", revision: "main" },
      deps,
      hooks(),
    );
    expect(out.files.map((f) => f.file)).toEqual(["mmproj-vision-F32.gguf"]);
    expect(out.mmproj).toBeNull();
  });
});

describe("pickProjector", () => {
  const f = (path: string) => ({ path, size: 1, oid: "x" });
  test("F16 first, then BF16, F32, Q8_0, then by name; none when the repo has none", () => {
    expect(
      pickProjector([f("mmproj-Q8_0.gguf"), f("mmproj-F32.gguf"), f("mmproj-F16.gguf")], "m.gguf")!.path,
    ).toBe("mmproj-F16.gguf");
    expect(pickProjector([f("mmproj-Q8_0.gguf"), f("mmproj-bf16.gguf")], "m.gguf")!.path).toBe(
      "mmproj-bf16.gguf",
    );
    expect(pickProjector([f("mmproj-b.gguf"), f("mmproj-a.gguf")], "m.gguf")!.path).toBe("mmproj-a.gguf");
    expect(pickProjector([f("model-Q4_K_M.gguf"), f("README.md"), f("mmproj.txt")], "m.gguf")).toBeNull();
  });

  test("the model's own folder's projector, else the nearest folder's above it; never another model's folder's", () => {
    const repo = [f("A/model-Q4.gguf"), f("A/mmproj-F16.gguf"), f("B/model-Q4.gguf"), f("B/mmproj-F16.gguf")];
    // B's model took A's projector (first by name): another model's, of another width, so no vision.
    expect(pickProjector(repo, "B/model-Q4.gguf")!.path).toBe("B/mmproj-F16.gguf");
    expect(pickProjector(repo, "A/model-Q4.gguf")!.path).toBe("A/mmproj-F16.gguf");
    // The folder's own over the root's, the root's for a model in a folder without one.
    const rooted = [...repo, f("mmproj-F16.gguf"), f("C/sub/model-00001-of-00002.gguf")];
    expect(pickProjector(rooted, "B/model-Q4.gguf")!.path).toBe("B/mmproj-F16.gguf");
    expect(pickProjector(rooted, "C/sub/model-00001-of-00002.gguf")!.path).toBe("mmproj-F16.gguf");
    expect(pickProjector([f("C/mmproj-Q8_0.gguf"), ...rooted], "C/sub/model-00001-of-00002.gguf")!.path).toBe(
      "C/mmproj-Q8_0.gguf",
    );
    // Only another folder's: none, rather than a projector of another model.
    expect(pickProjector([...repo, f("D/model-Q4.gguf")], "D/model-Q4.gguf")).toBeNull();
  });

  test("a projector in a folder of its own that holds no model (`mmproj/`) goes with the model above or beside it", () => {
    // A root model with its projectors in `mmproj/`: the first rule found none and pulled no vision.
    const apart = [f("model-Q4_K_M.gguf"), f("mmproj/mmproj-F32.gguf"), f("mmproj/mmproj-F16.gguf")];
    expect(pickProjector(apart, "model-Q4_K_M.gguf")!.path).toBe("mmproj/mmproj-F16.gguf");
    // A split model in a quant's folder, the projectors' folder beside it.
    const split = [
      f("Q4_K_M/m-00001-of-00002.gguf"),
      f("Q4_K_M/m-00002-of-00002.gguf"),
      f("mmproj/mmproj-F16.gguf"),
    ];
    expect(pickProjector(split, "Q4_K_M/m-00001-of-00002.gguf")!.path).toBe("mmproj/mmproj-F16.gguf");
    // A model's own `A/mmproj/` is its own: never given to B, whose folder holds none.
    const owned = [f("A/model-Q4.gguf"), f("A/mmproj/mmproj-F16.gguf"), f("B/model-Q4.gguf")];
    expect(pickProjector(owned, "A/model-Q4.gguf")!.path).toBe("A/mmproj/mmproj-F16.gguf");
    expect(pickProjector(owned, "B/model-Q4.gguf")).toBeNull();
    // The model's own folder's still first.
    expect(pickProjector([...apart, f("mmproj-Q8_0.gguf")], "model-Q4_K_M.gguf")!.path).toBe(
      "mmproj-Q8_0.gguf",
    );
  });
});
