import { expect, test } from "bun:test";
import { shellWord } from "../../src/util/shell-word.ts";

test("a plain path stays as it is; any other is one single-quoted word", () => {
  expect(shellWord("/usr/local/bin/llama-server")).toBe("/usr/local/bin/llama-server");
  expect(shellWord("/home/u/my data")).toBe("'/home/u/my data'");
  expect(shellWord("/home/u/it's")).toBe("'/home/u/it'\\''s'");
  expect(shellWord("/tmp/$(id)")).toBe("'/tmp/$(id)'");
});
