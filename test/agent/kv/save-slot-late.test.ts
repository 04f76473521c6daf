import { afterEach, beforeEach, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { LATE_LOOK } from "../../../src/agent/kv/kv-temps.ts";
import { Launch } from "../../../src/runtime/launch.ts";
import { saveUs } from "../../fixtures/slot-save.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// llama-server (b10587) defers a slot action on a busy slot; a slot action's task names no slot
// (only its `slot_action` does), so a release pops the deferred list's front, and a popped one
// whose slot is busy again goes to its back: a save and the erase queued behind it can come out
// erase first. The core took that erase's answer as the save's end, removed its temp then, and
// the save wrote the erased session's tokens afterwards, left on disk past the delete's answer
// (until a sweep 10 minutes later, none without another erase). llama-server is an injected `fetch`.

const TOKENS = "tokens of my secret diagnosis\n";
const look = { ...LATE_LOOK };
let restore: (() => void) | undefined;
beforeEach(() => {
  LATE_LOOK.ms = 5;
  LATE_LOOK.times = 40;
});
afterEach(() => {
  Object.assign(LATE_LOOK, look);
  restore?.();
  restore = undefined;
});

/** A save that fails with no HTTP answer (its task left queued), erases answered at once. */
function serverDeferringTheSave(loop: { busy?: boolean } = {}) {
  const asked = { temp: "", slots: 0 };
  const spy = spyOn(globalThis, "fetch").mockImplementation((async (url: string, init?: RequestInit) => {
    if (new URL(url).pathname === "/slots") {
      asked.slots++;
      // Its loop still writing the save: no answer until the request's signal ends it.
      if (loop.busy) return new Promise(() => {});
      return Response.json([]);
    }
    if (new URL(url).searchParams.get("action") === "save") {
      asked.temp = (JSON.parse(String(init?.body)) as { filename: string }).filename;
      throw new TypeError("fetch failed");
    }
    return Response.json({ id_slot: 0, n_erased: 0 });
  }) as unknown as typeof fetch);
  restore = () => spy.mockRestore();
  return asked;
}

const launchOf = (exited: Promise<void>) =>
  new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1, exited });

const until = async (done: () => boolean) => {
  for (let t = 0; t < 100 && !done(); t++) await new Promise((r) => setTimeout(r, 5));
};

test("a save that runs after the erase behind it answered: its file is removed within looks", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const asked = serverDeferringTheSave();
  const launch = launchOf(new Promise(() => {}));
  await saveUs(disk, launch);
  disk.removeSession("u", "s"); // sessions.delete while the save's task is still deferred
  await launch.slots.workOn(0);
  await disk.zeroes.done(); // the delete's answer
  const temp = join(dir.path, asked.temp);
  fs.writeFileSync(temp, TOKENS); // the deferred save runs at last
  await until(() => !fs.existsSync(temp));
  await disk.zeroes.done();
  expect(fs.existsSync(temp)).toBe(false);
});

test("such a late file is removed at the server's exit, looks spent or not", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const asked = serverDeferringTheSave();
  LATE_LOOK.times = 1;
  const exit = Promise.withResolvers<void>();
  const launch = launchOf(exit.promise);
  await saveUs(disk, launch);
  await launch.slots.workOn(0);
  await disk.zeroes.done();
  await new Promise((r) => setTimeout(r, 20)); // the one look spent
  const temp = join(dir.path, asked.temp);
  fs.writeFileSync(temp, TOKENS);
  expect(fs.existsSync(temp)).toBe(true);
  exit.resolve();
  await until(() => !fs.existsSync(temp));
  expect(fs.existsSync(temp)).toBe(false);
});

test("a late file unchanged between two looks stays while llama-server's loop has not answered", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const asked = serverDeferringTheSave({ busy: true });
  const launch = launchOf(new Promise(() => {}));
  await saveUs(disk, launch);
  await launch.slots.workOn(0);
  await disk.zeroes.done();
  const temp = join(dir.path, asked.temp);
  fs.writeFileSync(temp, TOKENS); // a write that stalls here, on a hung share
  await until(() => asked.slots > 0);
  await new Promise((r) => setTimeout(r, 40)); // looks that would have found it still
  expect(fs.existsSync(temp)).toBe(true);
});

test("a late file on a server known asleep is removed without GET /slots, which would wake it", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const asked = serverDeferringTheSave();
  const launch = new Launch({
    baseUrl: "http://127.0.0.1:9",
    apiKey: "k",
    slots: 1,
    exited: new Promise(() => {}),
    sleep: { idleMs: 1000, pushed: true, isAsleep: async () => true, rouse: async () => {} },
  });
  await saveUs(disk, launch);
  await launch.slots.workOn(0);
  await disk.zeroes.done();
  // llama-server sleeps only with no task queued (server-queue.cpp start_loop): the save is over.
  launch.heard("sleeping");
  const temp = join(dir.path, asked.temp);
  fs.writeFileSync(temp, TOKENS);
  await until(() => !fs.existsSync(temp));
  expect(fs.existsSync(temp)).toBe(false);
  // GET /slots waits until the model is loaded again (server-context.cpp create_response).
  expect(asked.slots).toBe(0);
});
