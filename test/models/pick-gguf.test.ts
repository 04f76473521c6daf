import { describe, expect, test } from "bun:test";
import {
  groupGgufs,
  groupGgufsSliced,
  isProjector,
  matchesQuant,
  pickGguf,
} from "../../src/models/pick-gguf.ts";

describe("which GGUF a ref means", () => {
  test("a quant matches as its own token, case-insensitively", () => {
    expect(matchesQuant("Model-7B-Q4_K_M.gguf", "q4_k_m")).toBe(true);
    expect(matchesQuant("model.q4_k_m-00001-of-00002.gguf", "Q4_K_M")).toBe(true);
    expect(matchesQuant("Q4_K_M/model-00001-of-00002.gguf", "Q4_K_M")).toBe(true);
    expect(matchesQuant("model_Q8_0.gguf", "Q8_0")).toBe(true);
    // A prefix of a longer quant, or a quant inside another, is not a match.
    expect(matchesQuant("model-Q4_K_M.gguf", "Q4_K")).toBe(false);
    expect(matchesQuant("model-IQ4_XS.gguf", "Q4_XS")).toBe(false);
    expect(matchesQuant("model-Q4_K_S.gguf", "Q4_K_M")).toBe(false);
  });

  test("split parts are one model under their first part; missing parts are named", () => {
    const groups = groupGgufs([
      "big-Q8_0-00002-of-00003.gguf",
      "big-Q8_0-00001-of-00003.gguf",
      "small-Q4_K_M.gguf",
      "README.md",
    ]);
    expect(groups).toEqual([
      {
        first: "big-Q8_0-00001-of-00003.gguf",
        parts: [
          "big-Q8_0-00001-of-00003.gguf",
          "big-Q8_0-00002-of-00003.gguf",
          "big-Q8_0-00003-of-00003.gguf",
        ],
        total: 3,
        missing: ["big-Q8_0-00003-of-00003.gguf"],
      },
      { first: "small-Q4_K_M.gguf", parts: ["small-Q4_K_M.gguf"], total: 1, missing: [] },
    ]);
  });

  test("a split name with no parts, part 0 or a part past its total is a file of its own, never a crash", () => {
    // -00001-of-00000 made a group of no parts whose first was undefined: a TypeError in every
    // pull and plan of the repo.
    const names = ["odd-00001-of-00000.gguf", "odd-00000-of-00002.gguf", "odd-00003-of-00002.gguf"];
    expect(groupGgufs(names)).toEqual(
      names.toSorted().map((name) => ({ first: name, parts: [name], total: 1, missing: [] })),
    );
    expect(pickGguf(["odd-00001-of-00000.gguf"], {})).toMatchObject({
      kind: "one",
      group: { first: "odd-00001-of-00000.gguf" },
    });
  });

  test("a split name claiming 99999 parts costs what is listed, not 99999 names (a hostile listing)", () => {
    // Each name made all 99999 of its parts' names, twice: a 20 KB listing of 100 such names held
    // the core 8 s and 2 GB, a few hundred more took it down, in every pull, plan and models.
    const names = Array.from({ length: 50 }, (_, i) => `m${i}-Q4_K_M-00001-of-99999.gguf`);
    const groups = groupGgufs(names);
    expect(groups).toHaveLength(50);
    const made = groups.reduce((n, g) => n + g.parts.length + g.missing.length, 0);
    expect(made).toBeLessThanOrEqual(50 * 2 * 11);
    expect(groups[0]).toMatchObject({ first: "m0-Q4_K_M-00001-of-99999.gguf", total: 99999 });
    expect(groups[0]!.missing).toHaveLength(10);
    expect(groups[0]!.missing[0]).toBe("m0-Q4_K_M-00002-of-99999.gguf");
    // A later part listed names its model still, past the missing ones named.
    const later = ["m-00001-of-00050.gguf", "m-00040-of-00050.gguf"];
    expect(pickGguf(later, { file: "m-00040-of-00050.gguf" })).toMatchObject({
      kind: "one",
      group: { first: "m-00001-of-00050.gguf", total: 50 },
    });
  });

  const repo = [
    "m-Q4_K_M.gguf",
    "m-Q8_0-00001-of-00002.gguf",
    "m-Q8_0-00002-of-00002.gguf",
    "mmproj-m-f16.gguf",
    "m-F16.gguf",
    "sub/m-Q4_K_M.gguf",
  ];

  test("by quantization: one match, a split model resolving to its first part", () => {
    expect(pickGguf(repo, { quant: "q8_0" })).toMatchObject({
      kind: "one",
      group: { first: "m-Q8_0-00001-of-00002.gguf", missing: [] },
    });
    // The projector is no model: F16 means the model's F16 file only.
    expect(pickGguf(repo, { quant: "F16" })).toMatchObject({ kind: "one", group: { first: "m-F16.gguf" } });
  });

  test("by quantization: several matches or none say what there is", () => {
    expect(pickGguf(repo, { quant: "Q4_K_M" })).toEqual({
      kind: "many",
      matches: ["m-Q4_K_M.gguf", "sub/m-Q4_K_M.gguf"],
    });
    const none = pickGguf(repo, { quant: "Q2_K" });
    expect(none.kind).toBe("none");
    if (none.kind === "none") expect(none.available).not.toContain("mmproj-m-f16.gguf");
  });

  test("by file: that file (a later part names its model); an unlisted file is none", () => {
    expect(pickGguf(repo, { file: "sub/m-Q4_K_M.gguf" })).toMatchObject({
      kind: "one",
      group: { first: "sub/m-Q4_K_M.gguf" },
    });
    expect(pickGguf(repo, { file: "m-Q8_0-00002-of-00002.gguf" })).toMatchObject({
      group: { first: "m-Q8_0-00001-of-00002.gguf" },
    });
    expect(pickGguf(repo, { file: "other.gguf" }).kind).toBe("none");
  });

  test("no quant nor file: the only model, else ambiguous", () => {
    expect(pickGguf(["a.gguf", "mmproj-a.gguf"], {})).toMatchObject({
      kind: "one",
      group: { first: "a.gguf" },
    });
    expect(pickGguf(repo, {}).kind).toBe("many");
    expect(pickGguf(["README.md"], {})).toEqual({ kind: "none", available: [] });
  });

  // second-state's llava repos name the projector `<model>-mmproj-model-f16.gguf`: `:F16` is
  // the model's F16 (docs/models.md "The projector"); a name starting with mmproj is one as before,
  // a longer word holding it further in ("my-mmprojection") is not.
  test("a projector with mmproj as a word of its name is never the model", () => {
    const llava = ["llava-v1.5-7b-Q4_K_M.gguf", "llava-v1.5-7b-mmproj-model-f16.gguf"];
    expect(pickGguf(llava, { quant: "F16" }).kind).toBe("none");
    expect(pickGguf([...llava, "llava-v1.5-7b-f16.gguf"], { quant: "F16" })).toMatchObject({
      kind: "one",
      group: { first: "llava-v1.5-7b-f16.gguf" },
    });
    expect(isProjector("sub/llava-v1.5-7b-mmproj-model-f16.gguf")).toBe(true);
    expect(isProjector("mmproj-F16.gguf")).toBe(true);
    expect(isProjector("mmprojection-7b.gguf")).toBe(true);
    expect(isProjector("my-mmprojection-7b.gguf")).toBe(false);
  });
});

describe("grouping a folder's many names", () => {
  test("gives the loop a turn every few thousand names, the groups as groupGgufs makes them", async () => {
    // The `models` listing's folders and snapshots (list-candidates.ts): 400,000 GGUF names were
    // grouped in one stretch, ~1.6 s of `ping` and `cancel` unanswered.
    const names = Array.from({ length: 40_000 }, (_, i) =>
      i % 2 ? `m-${i}-Q4_K_M.gguf` : `s${i % 97}-${String((i % 40) + 1).padStart(5, "0")}-of-00040.gguf`,
    );
    let turns = 0;
    const sliced = await groupGgufsSliced(names, async () => {
      turns++;
    });
    expect(sliced).toEqual(groupGgufs(names));
    // Each pass (the names, then the distinct GGUFs sorted) gives a turn every 4,096 names.
    const every = (n: number) => Math.floor((n - 1) / 4096);
    expect(turns).toBe(every(names.length) + every(new Set(names).size));
  });
});
