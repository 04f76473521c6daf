import { expect, test } from "bun:test";
import { isGgufPath, isProjector } from "../../src/models/pick-gguf.ts";
import { MAX_DEPTH, projectorsNear } from "../../src/models/projectors-near.ts";

// The rule as docs/models.md "The projector" states it, walked level by level as first written
// (quadratic in the listing): the linear one must agree with it on every layout.
function byTheRule(model: string, paths: readonly string[]): string[] {
  const folderOf = (p: string) => (p.lastIndexOf("/") < 0 ? "" : p.slice(0, p.lastIndexOf("/")));
  const own = new Map<string, string[]>();
  const models = new Set<string>();
  for (const p of paths) {
    if (!isGgufPath(p)) continue;
    if (!isProjector(p)) models.add(folderOf(p));
    else own.set(folderOf(p), [...(own.get(folderOf(p)) ?? []), p]);
  }
  for (let folder = folderOf(model); ; folder = folderOf(folder)) {
    const apart: string[] = [];
    for (const [f, found] of own) {
      if (f === folder || (folder !== "" && !f.startsWith(`${folder}/`))) continue;
      let ok = true;
      for (let g = f; g !== folder && ok; g = folderOf(g)) ok = !models.has(g);
      if (ok) apart.push(...found);
    }
    const here = own.get(folder) ?? apart;
    if (here.length > 0) return here.sort();
    if (folder === "") return [];
  }
}

/** A small deterministic generator: layouts are the same on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

test("the linear walk agrees with the rule on 2,000 random layouts", () => {
  const next = rng(7);
  const names = ["a", "b", "mmproj", "Q4", "a/b"];
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)]!;
  let nonEmpty = 0;
  for (let n = 0; n < 2000; n++) {
    const folder = () => {
      const depth = Math.floor(next() * 4);
      return Array.from({ length: depth }, () => pick(names)).join("/");
    };
    const at = (f: string, name: string) => (f === "" ? name : `${f}/${name}`);
    const paths: string[] = [];
    const count = 1 + Math.floor(next() * 8);
    for (let i = 0; i < count; i++)
      paths.push(at(folder(), next() < 0.5 ? `mmproj-${i}.gguf` : `model-${i}.gguf`));
    const model = at(folder(), "the-model.gguf");
    paths.push(model, "README.md");
    const want = byTheRule(model, paths);
    if (want.length > 0) nonEmpty++;
    expect({ layout: paths, got: projectorsNear(model, paths) }).toEqual({ layout: paths, got: want });
  }
  // The layouts reach the rule's every branch, not only "none".
  expect(nonEmpty).toBeGreaterThan(500);
});

test("a listing of deep folders: none of the other models' projectors, the model's own found", () => {
  // A model as deep as is looked at, beside 2,000 others each with a projector as deep (the rule's
  // walk compared every folder at each level, each walked back up: seconds at the hub's bound).
  const deep = Array.from({ length: MAX_DEPTH }, (_, i) => `d${i}`).join("/");
  const paths = [`${deep}/model.gguf`];
  for (let i = 0; i < 2000; i++) paths.push(`o${i}/${deep}/model.gguf`, `o${i}/${deep}/mmproj.gguf`);
  expect(projectorsNear(`${deep}/model.gguf`, paths)).toEqual([]);
  // The projector beside it is found, the others' never.
  paths.push(`${deep}/mmproj-F16.gguf`);
  expect(projectorsNear(`${deep}/model.gguf`, paths)).toEqual([`${deep}/mmproj-F16.gguf`]);
});

test("folders deeper than MAX_DEPTH are not looked at: a model there has no projector", () => {
  const deeper = Array.from({ length: MAX_DEPTH + 1 }, (_, i) => `d${i}`).join("/");
  expect(projectorsNear(`${deeper}/model.gguf`, [`${deeper}/model.gguf`, `${deeper}/mmproj.gguf`])).toEqual(
    [],
  );
  // A projector that deep is not one a shallower model takes either.
  expect(projectorsNear("model.gguf", ["model.gguf", `${deeper}/mmproj.gguf`])).toEqual([]);
  expect(projectorsNear("model.gguf", ["model.gguf", "mmproj/mmproj.gguf"])).toEqual(["mmproj/mmproj.gguf"]);
});
