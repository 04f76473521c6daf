import { expect, test } from "bun:test";
import { folderCandidates } from "../../src/models/list-candidates.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";

// A folder of many GGUF names (docs/models.md "`models`"): its split parts were grouped in one
// stretch of the loop, a folder of 400,000 names ~1.6 s of `ping` and `cancel` unanswered.
test("models: a folder's many names are grouped with turns of the loop between", async () => {
  // One split of 40,000 parts: one candidate, so no turn comes from making candidates.
  const names = Array.from(
    { length: 40_000 },
    (_, i) => `big-${String(i + 1).padStart(5, "0")}-of-99999.gguf`,
  );
  const drives = new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs: 30_000, lanes: 4 });
  const folderNames = async () => ({ names, undecodable: new Set<string>() });
  const { value, turns } = await turnsDuring(() => folderCandidates("/m", { drives, folderNames }));
  expect(value.map((c) => c.file)).toEqual(["big-00001-of-99999.gguf"]);
  // A turn every 4,096 names, in each of the grouping's two passes.
  expect(turns).toBeGreaterThanOrEqual(18);
});

// The core's stop (list.ts ListDeps.stop) during the grouping: it went on to the folder's last
// name, and then made every candidate, before the listing saw the stop at its first file.
test("models: a stop during a folder's grouping ends it at the next turn", async () => {
  const names = Array.from(
    { length: 40_000 },
    (_, i) => `big-${String(i + 1).padStart(5, "0")}-of-99999.gguf`,
  );
  const drives = new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs: 30_000, lanes: 4 });
  const stopping = new AbortController();
  const folderNames = async () => {
    // Stopped once the grouping has begun (its first turn comes after this one).
    setImmediate(() => stopping.abort(new Error("the core is stopping")));
    return { names, undecodable: new Set<string>() };
  };
  const listed = folderCandidates("/m", { drives, folderNames, stop: stopping.signal });
  await expect(listed).rejects.toThrow("the core is stopping");
});
