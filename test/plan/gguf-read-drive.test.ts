import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A header's reads are synchronous: a projector or a split's part on a dead network mount held
// the whole core in them. Each file's stat is asked off the loop first.
describe("readGgufHeader: a file whose drive does not answer", () => {
  test("is model_missing unreadable after the wait, nothing opened synchronously", async () => {
    using dir = tmpdir();
    const path = writeGguf(dir.path, "mmproj-far.gguf", llama7b());
    const silent = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1 });
    const open = spyOn(fs, "openSync");
    try {
      const err = await readGgufHeader(path, silent).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CoreError);
      expect(err).toMatchObject({ code: "model_missing", data: { path, problem: "unreadable" } });
      expect((err as Error).message).toContain("did not answer");
      expect(open.mock.calls.filter((c) => c[0] === path)).toEqual([]);
    } finally {
      open.mockRestore();
    }
    // A drive that answers: read as before.
    expect((await readGgufHeader(path, new DriveAnswers())).path).toBe(path);
  });
});

describe("readGgufHeader: a file refused unasked", () => {
  test("every lane held by another path's stat that hangs: its own drive is not blamed", async () => {
    using dir = tmpdir();
    const path = writeGguf(dir.path, "mmproj-near.gguf", llama7b());
    const asked: string[] = [];
    const stat = (p: string) => {
      asked.push(p);
      return new Promise(() => {});
    };
    const drives = new DriveAnswers({ stat, statWaitMs: 1, lanes: 1 });
    // The only lane hangs on another file's stat (a model on a dead mount).
    expect(await drives.answers("/mnt/dead/model.gguf")).toBe(false);
    const err = await readGgufHeader(path, drives).catch((e: unknown) => e);
    expect(asked).toEqual(["/mnt/dead/model.gguf"]);
    expect(err).toMatchObject({ code: "model_missing", data: { path, problem: "unreadable" } });
    expect((err as Error).message).not.toContain("did not answer");
    expect((err as Error).message).toContain("not asked");
  });
});
