import { describe, expect, spyOn, test } from "bun:test";
import type { HubFile } from "../../src/models/hub-client.ts";
import { pickFiles, quantOf } from "../../src/models/pick-file.ts";
import { pickGguf } from "../../src/models/pick-gguf.ts";
import type { CoreError } from "../../src/protocol/errors.ts";

const file = (path: string): HubFile => ({ path, size: 1, oid: "o", lfs: { oid: "s", size: 1 } });
const repo = "org/m";
// A listing shaped like a typical GGUF repo (bartowski, unsloth, TheBloke naming).
const LISTING = [
  "README.md",
  "Model-7B-Q4_K_M.gguf",
  "Model-7B-Q4_K_S.gguf",
  "Model-7B-IQ4_XS.gguf",
  "Model-7B-q8_0.gguf",
  "mmproj-Model-7B-f16.gguf",
  "Model-7B-F16-00002-of-00002.gguf",
  "Model-7B-F16-00001-of-00002.gguf",
].map(file);

function thrown(f: () => unknown): CoreError {
  try {
    f();
  } catch (err) {
    return err as CoreError;
  }
  throw new Error("did not throw");
}

describe("which files a pull means", () => {
  test("a quantization matches its GGUF case-insensitively, as a whole token", () => {
    expect(pickFiles({ repo, quant: "q4_k_m" }, LISTING).map((f) => f.path)).toEqual([
      "Model-7B-Q4_K_M.gguf",
    ]);
    expect(pickFiles({ repo, quant: "Q8_0" }, LISTING).map((f) => f.path)).toEqual(["Model-7B-q8_0.gguf"]);
    // Q4_K is not Q4_K_M or Q4_K_S; IQ4_XS is not Q4_XS.
    const none = thrown(() => pickFiles({ repo, quant: "Q4_K" }, LISTING));
    expect(none.code).toBe("invalid_request");
    expect(none.data).toMatchObject({ repo, quant: "Q4_K", cause: "not_found" });
    expect(none.message).toContain("Model-7B-Q4_K_M.gguf");
    expect(thrown(() => pickFiles({ repo, quant: "Q4_XS" }, LISTING)).data?.cause).toBe("not_found");
  });

  test("a split model comes whole, first part first, whether named by quant or by any part", () => {
    const parts = ["Model-7B-F16-00001-of-00002.gguf", "Model-7B-F16-00002-of-00002.gguf"];
    // F16 also names the vision projector, which a quant never means.
    expect(pickFiles({ repo, quant: "f16" }, LISTING).map((f) => f.path)).toEqual(parts);
    expect(pickFiles({ repo, file: parts[1] }, LISTING).map((f) => f.path)).toEqual(parts);
  });

  test("a split model with a part missing from the listing is refused, naming the part", () => {
    const broken = [file("A-Q4_K_M-00001-of-00003.gguf"), file("A-Q4_K_M-00003-of-00003.gguf")];
    const err = thrown(() => pickFiles({ repo, quant: "Q4_K_M" }, broken));
    expect(err.code).toBe("invalid_request");
    expect(err.message).toContain("lacks part(s) 2 of 3");
  });

  test("an explicit file is taken as named, also in a subfolder or when it is a projector", () => {
    const listing = [...LISTING, file("sub/Other-Q2_K.gguf")];
    expect(pickFiles({ repo, file: "sub/Other-Q2_K.gguf" }, listing).map((f) => f.path)).toEqual([
      "sub/Other-Q2_K.gguf",
    ]);
    expect(pickFiles({ repo, file: "mmproj-Model-7B-f16.gguf" }, listing)).toHaveLength(1);
    const missing = thrown(() => pickFiles({ repo, file: "nope.gguf" }, listing));
    expect(missing.data).toMatchObject({ cause: "not_found", file: "nope.gguf" });
  });

  test("several matches are ambiguous and listed; a bare repo with several models asks for a choice", () => {
    const twice = [file("a/X-Q4_K_M.gguf"), file("b/X-Q4_K_M.gguf")];
    const err = thrown(() => pickFiles({ repo, quant: "Q4_K_M" }, twice));
    expect(err.data).toMatchObject({ cause: "ambiguous", available: ["a/X-Q4_K_M.gguf", "b/X-Q4_K_M.gguf"] });
    const bare = thrown(() => pickFiles({ repo }, LISTING));
    expect(bare.data?.cause).toBe("ambiguous");
    expect(bare.data?.quantizations).toEqual(["F16", "IQ4_XS", "Q4_K_M", "Q4_K_S", "Q8_0"]);
    expect(bare.message).toContain("name a quantization or a file");
  });

  test("a listing of many GGUFs is told ambiguous by one look per candidate, not a scan of the matches each", () => {
    // Each candidate was looked up in the list of matches by a scan (includes): 100,000 names held
    // the core's event loop 12 s, the 64 MiB a listing may be (half a million names) minutes, with
    // ping and cancel unanswered. The scans are counted, not timed.
    const listing = Array.from({ length: 20_000 }, (_, i) => file(`m${i}-Q4_K_M.gguf`));
    const scans = spyOn(Array.prototype, "includes");
    try {
      const err = thrown(() => pickFiles({ repo, quant: "Q4_K_M" }, listing));
      expect(err.data).toMatchObject({ cause: "ambiguous" });
      expect(err.message).toContain("has 20000 GGUFs of quantization Q4_K_M");
      expect(thrown(() => pickFiles({ repo }, listing)).data).toMatchObject({ cause: "ambiguous" });
      expect(scans.mock.calls.length).toBeLessThan(1000);
    } finally {
      scans.mockRestore();
    }
  });

  test("what the repo has is listed up to 100 names with the count: a hostile repo makes no multi-MB error", () => {
    // Every name and every made-up quantization went into data: 100,000 files, a line of MBs.
    const listing = Array.from({ length: 100_000 }, (_, i) => file(`m${i}-Q9_X${i}.gguf`));
    const err = thrown(() => pickFiles({ repo, quant: "Q4_K_M" }, listing));
    expect(err.data).toMatchObject({
      cause: "not_found",
      available_count: 100_000,
      quantizations_count: 100_000,
    });
    expect(err.data?.available).toHaveLength(100);
    expect(err.data?.quantizations).toHaveLength(100);
    expect(JSON.stringify({ m: err.message, d: err.data }).length).toBeLessThan(20_000);
    const many = thrown(() => pickFiles({ repo }, listing));
    expect(many.data).toMatchObject({ cause: "ambiguous", available_count: 100_000 });
    expect(many.data?.available).toHaveLength(100);
    // A short list is whole, its count beside it.
    const twice = thrown(() =>
      pickFiles({ repo, quant: "Q4_K_M" }, [file("a/X-Q4_K_M.gguf"), file("b/X-Q4_K_M.gguf")]),
    );
    expect(twice.data).toMatchObject({
      available: ["a/X-Q4_K_M.gguf", "b/X-Q4_K_M.gguf"],
      available_count: 2,
    });
  });

  test("a bare repo with one model takes it; a repo without GGUFs says so", () => {
    expect(pickFiles({ repo }, [file("README.md"), file("only-Q5_K_M.gguf")]).map((f) => f.path)).toEqual([
      "only-Q5_K_M.gguf",
    ]);
    const none = thrown(() =>
      pickFiles({ repo, quant: "Q4_K_M" }, [file("model.safetensors"), file("README.md")]),
    );
    expect(none.data?.cause).toBe("no_gguf");
    expect(none.message).toBe("org/m has no GGUF file");
  });

  test("quantizations read from names; split parts group", () => {
    expect(quantOf("x/Llama-3-8B-Instruct.Q4_K_M.gguf")).toBe("Q4_K_M");
    expect(quantOf("gpt-oss-20b-MXFP4.gguf")).toBe("MXFP4");
    expect(quantOf("model-bf16-00001-of-00004.gguf")).toBe("BF16");
    expect(quantOf("model.gguf")).toBeNull();
    expect(quantOf("Q4_K_M/model-00001-of-00002.gguf")).toBe("Q4_K_M");
    expect(thrown(() => pickFiles({ repo }, LISTING)).data?.available).toContain(
      "Model-7B-F16-*-of-00002.gguf",
    );
  });

  test("a quantization's folder of split parts: pull takes what the hf: resolver resolves (one picker)", () => {
    const folder = [
      "README.md",
      "Q4_K_M/model-00002-of-00002.gguf",
      "Q4_K_M/model-00001-of-00002.gguf",
      "Q8_0/model-00001-of-00001.gguf",
    ];
    const pulled = pickFiles({ repo, quant: "Q4_K_M" }, folder.map(file)).map((f) => f.path);
    expect(pulled).toEqual(["Q4_K_M/model-00001-of-00002.gguf", "Q4_K_M/model-00002-of-00002.gguf"]);
    const resolved = pickGguf(folder, { quant: "Q4_K_M", file: undefined });
    expect(resolved.kind === "one" && resolved.group.parts).toEqual(pulled);
    const err = thrown(() => pickFiles({ repo, quant: "Q5_K_M" }, folder.map(file)));
    expect(err.data).toMatchObject({ cause: "not_found", quantizations: ["Q4_K_M", "Q8_0"] });
  });
});
