import { expect, test } from "bun:test";
import { ModelMemo } from "../../src/plan/model-memo.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The memo asked its own drives (a test's stat and wait) for the path, then read the header
// through the core's shared ones: a test could not fake that read's stat, nor bound it by its
// own wait. A stat that never settles stands in for a share gone offline; the wait is 50 ms.
test("the header read asks the memo's drives: gone after the first stat, the read is unreadable", async () => {
  using dir = tmpdir();
  const path = writeGguf(dir.path, "m.gguf", llama7b());
  let stats = 0;
  const memo = new ModelMemo((p) => p, {
    stat: (p: string | Buffer) => (p === path && ++stats > 1 ? new Promise(() => {}) : Promise.resolve({})),
    statWaitMs: 50,
  });
  const err = await memo.read(path).catch((e: unknown) => e);
  expect(stats).toBe(2);
  expect((err as { data?: { problem?: string } }).data?.problem).toBe("unreadable");
});
