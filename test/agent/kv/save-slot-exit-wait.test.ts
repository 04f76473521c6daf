import { afterEach, expect, spyOn, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { neverExiting, savedNothing, saveUs, shutdownWaitEnds } from "../../fixtures/slot-save.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A save's request ends with the wait for its server's exit once the server's stop begins
// (save-slot.ts). A save llama-server still answered then left that wait running after it was
// over: 60 s of a timer, and shutdown's wait for the exits (slot-clear.ts `exitWaitsEnded`) held
// by a save long done, a server stuck in the kernel never exiting. llama-server is an injected `fetch`.

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

test("a save answered after its server's stop began leaves no wait for the exit behind", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const died = new AbortController();
  const answer = Promise.withResolvers<Response>();
  const spy = spyOn(globalThis, "fetch").mockImplementation(
    (() => answer.promise) as unknown as typeof fetch,
  );
  restore = () => spy.mockRestore();
  const launch = neverExiting(died);
  const saving = saveUs(disk, launch);
  await new Promise((r) => setImmediate(r));
  died.abort(new Error("stopping"));
  answer.resolve(savedNothing());
  await saving;
  expect(await shutdownWaitEnds()).toBe(true);
  await disk.zeroes.done();
});
