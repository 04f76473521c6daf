import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { RefusalMemo } from "../../src/config/refusal-memo.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A load that fails its first `fails` calls with `err`, then loads; it counts its calls. */
function loader(err: CoreError, fails: number) {
  const calls = { n: 0 };
  const load = () => {
    calls.n++;
    if (calls.n <= fails) throw err;
    return "loaded";
  };
  return { calls, load };
}

test("a read the OS failed (EMFILE, EIO, a lock) is tried again: the file may be fine", () => {
  using dir = tmpdir();
  const file = join(dir.path, "config.yaml");
  writeFileSync(file, "app:\n  max_steps: 7\n");
  // What config-file.ts throws when its read fails: no line, no key.
  const data = { file, line: null, key: null };
  const { load } = loader(
    new CoreError("config_invalid", `cannot read ${file}: too many open files`, data),
    1,
  );
  const memo = new RefusalMemo();
  expect(() => memo.run(file, load)).toThrow("too many open files");
  // The file is unchanged, but its refusal was the process's, not its text's.
  expect(memo.run(file, load)).toBe("loaded");
});

test("a refusal of the file's text is kept while the file stays the same", () => {
  using dir = tmpdir();
  const file = join(dir.path, "config.yaml");
  writeFileSync(file, "app:\n  max_steps: 0\n");
  const refused = new CoreError("config_invalid", "too small", { file, line: 2, key: "app.max_steps" });
  const { calls, load } = loader(refused, 10);
  const memo = new RefusalMemo();
  for (let i = 0; i < 3; i++) expect(() => memo.run(file, load)).toThrow(refused);
  expect(calls.n).toBe(1);
});
