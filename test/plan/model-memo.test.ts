import { describe, expect, test } from "bun:test";
import { rmSync, utimesSync } from "node:fs";
import { ModelMemo } from "../../src/plan/model-memo.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { DriveAnswers, statLate } from "../../src/util/drive-answers.ts";
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

  test("several models read in turn (a swap back and forth) are each parsed once; the least recent goes past 8", async () => {
    using dir = tmpdir();
    const paths = Array.from({ length: 9 }, (_, i) => writeGguf(dir.path, `m${i}.gguf`, llama7b()));
    const memo = new ModelMemo();
    for (let round = 0; round < 3; round++) for (const p of paths.slice(0, 2)) await memo.read(p);
    expect(memo.parses).toBe(2);
    for (const p of paths) await memo.read(p);
    expect(memo.parses).toBe(9);
    // m0 was the least recently read of nine: it went; m8 stayed.
    await memo.read(paths[8] as string);
    expect(memo.parses).toBe(9);
    await memo.read(paths[0] as string);
    expect(memo.parses).toBe(10);
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

  test("a file whose stat does not answer (a dead network mount) is unreadable after the wait, one stat asked", async () => {
    using dir = tmpdir();
    const path = writeGguf(dir.path, "m.gguf", llama7b());
    let asked = 0;
    let answer = () => {};
    const stat = () =>
      ++asked === 1
        ? new Promise<void>((resolve) => {
            answer = resolve;
          })
        : Promise.resolve();
    const memo = new ModelMemo(undefined, { stat, statWaitMs: 1 });
    for (let i = 0; i < 2; i++) {
      const err = await memo.read(path, "model.path").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CoreError);
      expect(err).toMatchObject({
        code: "model_missing",
        data: { path, problem: "unreadable", key: "model.path" },
      });
      expect((err as Error).message).toContain("did not answer");
    }
    // Nothing read synchronously behind it, and the second read joined the first stat.
    expect(memo.parses).toBe(0);
    expect(asked).toBe(1);
    // The drive answers: the next read reads the file.
    answer();
    expect((await memo.read(path)).path).toBe(path);
  });

  test("an hf: path whose cache folder's stat does not answer is unreadable before its resolve reads the cache", async () => {
    let resolved = 0;
    const asked: string[] = [];
    const memo = new ModelMemo(
      (path) => {
        resolved++;
        return path;
      },
      {
        folderOf: (configured) => (configured.startsWith("hf:") ? "/nas/hf/hub" : null),
        stat: (path: string) => {
          asked.push(path);
          return new Promise<void>(() => {});
        },
        statWaitMs: 1,
      },
    );
    const err = await memo.read("hf:org/model:Q4_K_M", "model.path").catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "model_missing",
      data: { path: "hf:org/model:Q4_K_M", problem: "unreadable", key: "model.path" },
    });
    expect((err as Error).message).toContain("/nas/hf/hub");
    expect((err as Error).message).toContain("did not answer");
    // The resolve's synchronous reads of the cache never ran: they would have held the loop.
    expect(resolved).toBe(0);
    expect(asked).toEqual(["/nas/hf/hub"]);
  });
});

describe("statLate: a path refused unasked", () => {
  test("every lane held by another path's stat that hangs: not said to have a drive that did not answer", async () => {
    const asked: string[] = [];
    const drives = new DriveAnswers({
      stat: (path: string) => {
        asked.push(path);
        return new Promise<void>(() => {});
      },
      statWaitMs: 1,
      lanes: 1,
    });
    expect(await statLate(drives, "/mnt/dead/a.gguf")).toContain("did not answer within");
    // The only lane hangs on a's stat: b is refused at once, its drive never asked.
    const why = await statLate(drives, "/home/u/b.gguf");
    expect(asked).toEqual(["/mnt/dead/a.gguf"]);
    expect(why).not.toBeNull();
    expect(why).not.toContain("did not answer");
    expect(why).toContain("not asked");
  });
});
