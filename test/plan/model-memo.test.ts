import { describe, expect, test } from "bun:test";
import { rmSync, utimesSync } from "node:fs";
import { ModelMemo } from "../../src/plan/model-memo.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { llama7b, llama8b, writeGguf } from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("ModelMemo", () => {
  test("parses a file once while it is unchanged, again when it changes", async () => {
    using dir = tmpdir();
    const path = writeGguf(dir.path, "m.gguf", llama7b());
    const memo = new ModelMemo();
    const first = await memo.read(path);
    expect(await memo.read(path)).toBe(first);
    expect(memo.parses).toBe(1);
    // Replaced by another model under the same name (a re-download): read again.
    writeGguf(dir.path, "m.gguf", llama8b());
    const second = await memo.read(path);
    expect(memo.parses).toBe(2);
    expect(second.layers[0]!.k_per_token).not.toBe(first.layers[0]!.k_per_token);
    // Touched only: the modification time is part of the identity.
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    await memo.read(path);
    expect(memo.parses).toBe(3);
  });

  test("a file that went away is model_missing, not the remembered header", async () => {
    using dir = tmpdir();
    const path = writeGguf(dir.path, "gone.gguf", llama7b());
    const memo = new ModelMemo();
    await memo.read(path);
    rmSync(path);
    const err = await memo.read(path).catch((e) => e);
    expect(err).toBeInstanceOf(CoreError);
    expect((err as CoreError).code).toBe("model_missing");
  });
});
