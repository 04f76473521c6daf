import { describe, expect, test } from "bun:test";
import type { Stats } from "node:fs";
import { binaryVersion } from "../../src/runtime/binary-version.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";

// A llama-server on a network share gone offline: its stat hangs for minutes (drive-answers.ts).
const nextTurn = () => new Promise<string>((r) => setImmediate(() => r("the loop's next turn")));

describe("binaryVersion", () => {
  test("is asked of its drive off the loop: the loop turns while the stat hangs", async () => {
    let answer: (st: unknown) => void = () => {};
    const asked: string[] = [];
    const drive = new DriveAnswers({
      stat: (path) => {
        asked.push(String(path));
        return new Promise((r) => {
          answer = r;
        });
      },
      lanes: 1,
    });
    const version = binaryVersion("/share/llama-server", drive);
    expect(await Promise.race([version, nextTurn()])).toBe("the loop's next turn");
    expect(asked).toEqual(["/share/llama-server"]);
    answer({ ino: 7, size: 1234, mtimeMs: 99 } as Partial<Stats>);
    expect(await version).toBe("/share/llama-server\u00001234\u000099");
  });

  test("a drive that does not answer within its wait, or a missing file, is no version", async () => {
    const hung = new DriveAnswers({ stat: () => new Promise(() => {}), statWaitMs: 1, lanes: 1 });
    expect(await binaryVersion("/share/llama-server", hung)).toBeUndefined();
    const missing = new DriveAnswers({ stat: async () => Promise.reject(new Error("ENOENT")), lanes: 1 });
    expect(await binaryVersion("/nowhere/llama-server", missing)).toBeUndefined();
  });
});
