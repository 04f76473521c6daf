import { afterEach, beforeEach, expect, test } from "bun:test";
import { join } from "node:path";
import { findProjector } from "../../src/models/find-projector.ts";
import { resolveModelPath } from "../../src/models/resolve.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

// An `hf:` model's snapshot was listed by a plain readdir with no deadline and no lane: on a
// network share whose stat answered but whose listing hangs, the plan (and chat) waited for good,
// and each new plan held one more file thread.

let dir: ReturnType<typeof tmpdir>;
beforeEach(() => {
  dir = tmpdir();
});
afterEach(() => dir[Symbol.dispose]());

const env = () => ({ HF_HUB_CACHE: dir.path });

test("a snapshot listing that never answers fails the resolve as unreadable once the drives' wait is over", async () => {
  layRepo(dir.path, "org/hang", { "h-Q4_K_M.gguf": tinyModel() });
  const drives = new DriveAnswers({ statWaitMs: 50 });
  const never = () => new Promise<string[]>(() => {});
  const asked = resolveModelPath("hf:org/hang:Q4_K_M", env(), dir.path, "model.path", {
    drives,
    snapshotFiles: never,
  });
  const err = await asked.then(
    () => null,
    (e) => e,
  );
  expect(err).toMatchObject({ code: "model_missing", data: { problem: "unreadable", key: "model.path" } });
  expect(err.message).toContain("did not answer within 0.05 s");
});

test("two resolves of one snapshot share the listing in flight", async () => {
  const { snapshot } = layRepo(dir.path, "org/share", { "s-Q4_K_M.gguf": tinyModel() });
  const drives = new DriveAnswers({ statWaitMs: 5_000 });
  let calls = 0;
  let answer: (names: string[]) => void = () => {};
  const snapshotFiles = () => {
    calls++;
    return new Promise<string[]>((done) => {
      answer = done;
    });
  };
  const options = { drives, snapshotFiles };
  const first = resolveModelPath("hf:org/share:Q4_K_M", env(), dir.path, "model.path", options);
  const second = resolveModelPath("hf:org/share:Q4_K_M", env(), dir.path, "model.path", options);
  await new Promise((r) => setTimeout(r, 20));
  answer(["s-Q4_K_M.gguf"]);
  const want = join(snapshot, "s-Q4_K_M.gguf");
  expect(await Promise.all([first, second])).toEqual([want, want]);
  expect(calls).toBe(1);
});

// `mmproj: auto` of an `hf:` model walks the same snapshot (models/find-projector.ts): in a lane
// and key of its own, a resolve and a projector search of one snapshot on a dead share each held
// a file thread, and a live one was walked twice at once.
test("a resolve and mmproj: auto's search of one snapshot share the walk in flight", async () => {
  const { snapshot } = layRepo(dir.path, "org/both", { "b-Q4_K_M.gguf": tinyModel() });
  const drives = new DriveAnswers({ statWaitMs: 5_000, lanes: 4 });
  let walks = 0;
  let release: (names: string[]) => void = () => {};
  const walked = new Promise<string[]>((done) => {
    release = done;
  });
  const snapshotFiles = () => {
    walks++;
    return walked;
  };
  const model = modelInfo(await readGgufHeader(join(snapshot, "b-Q4_K_M.gguf")));
  const options = { drives, snapshotFiles };
  const resolved = resolveModelPath("hf:org/both:Q4_K_M", env(), dir.path, "model.path", options);
  const projector = findProjector("auto", model, "model.mmproj", options);
  await new Promise((r) => setTimeout(r, 50));
  release(["b-Q4_K_M.gguf"]);
  expect(await resolved).toBe(join(snapshot, "b-Q4_K_M.gguf"));
  expect(await projector).toMatchObject({ kind: "none" });
  expect(walks).toBe(1);
});

// Shared in flight only: a walk that failed (a share that dropped mid-walk) must not answer the
// next resolve or projector search of that snapshot, which walks it again.
test("a failed snapshot walk is not remembered: the next projector search and resolve walk again", async () => {
  const { snapshot } = layRepo(dir.path, "org/again", { "a-Q4_K_M.gguf": tinyModel() });
  const drives = new DriveAnswers({ statWaitMs: 5_000, lanes: 4 });
  let walks = 0;
  const snapshotFiles = async () => {
    walks++;
    if (walks === 1) throw new Error("EIO");
    return ["a-Q4_K_M.gguf"];
  };
  const options = { drives, snapshotFiles };
  const failed = resolveModelPath("hf:org/again:Q4_K_M", env(), dir.path, "model.path", options);
  expect(
    await failed.then(
      () => null,
      (e) => e,
    ),
  ).not.toBeNull();
  const model = modelInfo(await readGgufHeader(join(snapshot, "a-Q4_K_M.gguf")));
  expect(await findProjector("auto", model, "model.mmproj", options)).toMatchObject({ kind: "none" });
  expect(await resolveModelPath("hf:org/again:Q4_K_M", env(), dir.path, "model.path", options)).toBe(
    join(snapshot, "a-Q4_K_M.gguf"),
  );
  expect(walks).toBe(3);
});
