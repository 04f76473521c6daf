import { expect, test } from "bun:test";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { oneLanedAtATime } from "../../src/util/one-at-a-time.ts";

// Two asks of one folder in the same tick (two `models` a host sent together, a plan's projector
// and the listing): the first's call is started only once its lane is granted, a tick later, so
// the second found no call out, took a lane of its own and held it on the first's hung listing.
// One dead folder then held two of the few file threads (util/drive-answers.ts `laned`).
test("asks of one key in the same tick share one lane, not one each", async () => {
  const drives = new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs: 2, lanes: 2 });
  const listings = oneLanedAtATime<string[]>();
  let started = 0;
  const hung = () => {
    started++;
    return new Promise<string[]>(() => {});
  };
  const both = await Promise.all([listings("/dead", drives, hung), listings("/dead", drives, hung)]);
  expect(both).toEqual(["late", "late"]);
  expect(started).toBe(1);
  expect(await drives.statOf("/alive/model.gguf")).not.toBe("late"); // one lane still free
});

test("a listing that rejects is asked afresh the next time", async () => {
  const drives = new DriveAnswers({ statWaitMs: 1000, lanes: 1 });
  const listings = oneLanedAtATime<string[]>();
  await expect(listings("/f", drives, () => Promise.reject(new Error("EACCES")))).rejects.toThrow("EACCES");
  expect(await listings("/f", drives, async () => ["a"])).toEqual(["a"]);
});
