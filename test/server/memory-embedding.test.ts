import { describe, expect, test } from "bun:test";
import { renameSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { embeddingFingerprint } from "../../src/server/memory-embedding.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("the embedding model's fingerprint", () => {
  test("the same file and flags give the same one; a file replaced or touched, or other flags, another", () => {
    using dir = tmpdir();
    const path = join(dir.path, "embed.gguf");
    writeFileSync(path, "GGUF one");
    const first = embeddingFingerprint(path, []);
    expect(embeddingFingerprint(path, [])).toBe(first);
    expect(embeddingFingerprint(path, ["--pooling", "cls"])).not.toBe(first);
    utimesSync(path, new Date(1_000_000), new Date(2_000_000));
    const touched = embeddingFingerprint(path, []);
    expect(touched).not.toBe(first);
    // Replaced in place by another file of the same size and time: another inode.
    const other = join(dir.path, "other.gguf");
    writeFileSync(other, "GGUF two");
    utimesSync(other, new Date(1_000_000), new Date(2_000_000));
    renameSync(other, path);
    expect(embeddingFingerprint(path, [])).not.toBe(touched);
    // A path that cannot be read (an hf: reference not yet resolved) is keyed by the path itself.
    expect(embeddingFingerprint("hf:org/model", [])).toBe(embeddingFingerprint("hf:org/model", []));
  });
});
