import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { mkdirSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { chooseChatModel, findModel, shownName } from "../../src/config/choose-model.ts";
import { parseConfigText } from "../../src/config/load.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// One GGUF, one llama-server, however a request spells its path (docs/models.md "Several models").

function stack(dir: string) {
  for (const f of ["model.gguf", "second.gguf", "other.gguf"]) writeFileSync(join(dir, f), "GGUF");
  mkdirSync(join(dir, "sub"));
  symlinkSync(join(dir, "second.gguf"), join(dir, "sub", "link.gguf"));
  const text = "model:\n  path: ./model.gguf\nmodels:\n  - {name: second, path: ./second.gguf}\n";
  return parseConfigText(text, join(dir, "config.yaml")).config;
}

describe("a model by path", () => {
  test("a configured model's file, however spelled, is that model; the result shows the request's spelling", () => {
    using dir = tmpdir();
    const config = stack(dir.path);
    const spellings = [
      join(dir.path, "second.gguf"),
      join(dir.path, "x", "..", "second.gguf"),
      relative(process.cwd(), join(dir.path, "second.gguf")),
      join(dir.path, "sub", "link.gguf"),
    ];
    for (const ref of spellings) {
      const choice = findModel(config, ref);
      expect(choice).toMatchObject({ kind: "configured", name: "second" });
      expect(shownName(choice)).toBe(ref);
    }
    expect(chooseChatModel(config, join(dir.path, "model.gguf"), undefined).name).toBe("default");
  });

  test("two spellings of one unconfigured file are one model", () => {
    using dir = tmpdir();
    const config = stack(dir.path);
    const a = findModel(config, join(dir.path, "other.gguf"));
    const b = findModel(config, relative(process.cwd(), join(dir.path, "sub", "..", "other.gguf")));
    expect(a.kind).toBe("path");
    expect(b.name).toBe(a.name);
  });

  test("a file deleted since it was loaded keeps the spelling it had: its unload names the model still running", () => {
    // Loaded through a linked folder (macOS's /tmp, a models folder on another disk) or a link to
    // its file, the model runs under the real path; once the file is gone, the same request spelled
    // it by the link and models.unload answered `unloaded: false` for the server still running.
    using dir = tmpdir();
    const config = stack(dir.path);
    mkdirSync(join(dir.path, "real"));
    symlinkSync(join(dir.path, "real"), join(dir.path, "linked"));
    writeFileSync(join(dir.path, "real", "gone.gguf"), "GGUF");
    symlinkSync(join(dir.path, "real", "gone.gguf"), join(dir.path, "to-gone.gguf"));
    symlinkSync("gone.gguf", join(dir.path, "real", "rel.gguf"));
    const refs = [
      join(dir.path, "linked", "gone.gguf"),
      join(dir.path, "to-gone.gguf"),
      join(dir.path, "linked", "rel.gguf"),
    ];
    const loaded = refs.map((ref) => findModel(config, ref).name);
    expect(new Set(loaded).size).toBe(1);
    rmSync(join(dir.path, "real", "gone.gguf"));
    for (const ref of refs) expect(findModel(config, ref).name).toBe(loaded[0] as string);
  });

  test("a configured model's hf: reference, as configured, is that model: one llama-server, not two", () => {
    const text =
      "model:\n  path: /m/model.gguf\nmodels:\n  - {name: qwen, path: 'hf:Qwen/Qwen3-8B-GGUF:Q4_K_M'}\n";
    const config = parseConfigText(text, "/m/config.yaml").config;
    const choice = findModel(config, "hf:Qwen/Qwen3-8B-GGUF:Q4_K_M");
    expect(choice).toMatchObject({ kind: "configured", name: "qwen" });
    expect(shownName(choice)).toBe("hf:Qwen/Qwen3-8B-GGUF:Q4_K_M");
    expect(findModel(config, "hf:Qwen/Qwen3-8B-GGUF:Q8_0")).toMatchObject({ kind: "path" });
  });
});

describe("a model by path on a disk whose names have no case (Windows)", () => {
  let spy: ReturnType<typeof spyOn> | undefined;
  afterEach(() => spy?.mockRestore());

  // What Windows' native realpath (GetFinalPathNameByHandle) answers: the name as it is on disk,
  // whatever case, 8.3 short name, subst drive or \\?\ prefix the request used. Bun's other
  // realpathSync keeps the request's own spelling there (run under Wine: `C:\w3\DATA` stays so,
  // where the native call answers `C:\w3\data`).
  function nativeIgnoresCase(onDisk: string[]): void {
    const real = realpathSync.native;
    spy = spyOn(realpathSync, "native").mockImplementation(((p: string) => {
      const found = onDisk.find((f) => f.toLowerCase() === String(p).toLowerCase());
      return found ?? real(p);
    }) as typeof realpathSync.native);
  }

  test("a configured model's file spelled in another case is that model, not a second llama-server", () => {
    using dir = tmpdir();
    const config = stack(dir.path);
    const file = join(dir.path, "second.gguf");
    nativeIgnoresCase([dir.path, file]);
    const choice = findModel(config, join(dir.path, "SECOND.GGUF"));
    expect(choice).toMatchObject({ kind: "configured", name: "second" });
    expect(shownName(choice)).toBe(join(dir.path, "SECOND.GGUF"));
  });

  test("two spellings of one unconfigured file, differing in case, are one model", () => {
    using dir = tmpdir();
    const config = stack(dir.path);
    const file = join(dir.path, "other.gguf");
    nativeIgnoresCase([dir.path, file]);
    expect(findModel(config, join(dir.path, "Other.GGUF")).name).toBe(findModel(config, file).name);
  });
});
