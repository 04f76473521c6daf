import { afterEach, beforeEach, describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { ERASE_RETRY, ERASE_TRIES } from "../../../src/agent/kv/slot-clear.ts";
import { Launch } from "../../../src/runtime/launch.ts";
import { saveUs } from "../../fixtures/slot-save.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A save whose request fails with no HTTP answer (a reset socket, "fetch failed") while its
// llama-server lives may still be queued there: llama-server runs its tasks in order and a queued
// save runs to its end whatever became of the request (93b), creating the temporary file then.
// Its booking in `Zeroes` was settled at once, so an erase meanwhile found no file, and the file
// made after it stayed on disk past the delete's answer (until the 10-minute stale sweep).
// llama-server is an injected `fetch` here: its answers are shaped as 93b records them.

const TOKENS = "tokens of my secret diagnosis\n";

type Answer = (action: string, body: { filename: string }) => Promise<Response>;

/** llama-server as `fetch` sees it: each slot action answered by `answer`; the actions asked, in order. */
function fakeServer(answer: Answer) {
  const asked: string[] = [];
  const spy = spyOn(globalThis, "fetch").mockImplementation((async (url: string, init?: RequestInit) => {
    const action = new URL(url).searchParams.get("action") ?? "";
    asked.push(action);
    return answer(action, JSON.parse(String(init?.body ?? "{}")) as { filename: string });
  }) as unknown as typeof fetch);
  return { asked, spy };
}

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

const erased = () =>
  new Response(JSON.stringify({ id_slot: 0, n_erased: 0 }), {
    headers: { "Content-Type": "application/json" },
  });

test("a save cut off with no HTTP answer: a file its queued task makes after an erase is removed", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const eraseAnswer = Promise.withResolvers<Response>();
  let temp = "";
  const fake = fakeServer(async (action, body) => {
    if (action === "save") {
      temp = body.filename;
      throw new TypeError("fetch failed"); // the socket reset, nothing answered
    }
    return eraseAnswer.promise;
  });
  restore = () => fake.spy.mockRestore();
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1 });
  await saveUs(disk, launch);
  // sessions.delete while llama-server's save task is still queued: no file of it yet.
  disk.removeSession("u", "s");
  // The queued save runs, then the erase queued behind it answers (tasks in order, 93b).
  fs.writeFileSync(join(dir.path, temp), TOKENS);
  eraseAnswer.resolve(erased());
  await launch.slots.workOn(0);
  await disk.zeroes.done();
  expect({ asked: fake.asked, left: fs.existsSync(join(dir.path, temp)) }).toEqual({
    asked: ["save", "erase"],
    left: false,
  });
});

test("a save llama-server answered with an HTTP error settles at once: no erase is asked", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const fake = fakeServer(async () =>
    Response.json(
      { error: { code: 500, message: "failed to write", type: "server_error" } },
      { status: 500 },
    ),
  );
  restore = () => fake.spy.mockRestore();
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1 });
  await saveUs(disk, launch);
  await disk.zeroes.done();
  expect(fake.asked).toEqual(["save"]);
});

// The erase queued behind such a save failing too (a reset connection, its 60 s limit) while the
// server lives proves nothing of the save's task: the booking was settled anyway, and a file the
// task made after a delete's erase stayed. The erase is asked again, a bounded number of times.
describe("the erase behind a save that did not answer fails, its server alive", () => {
  const pause = ERASE_RETRY.pauseMs;
  beforeEach(() => {
    ERASE_RETRY.pauseMs = 0;
  });
  afterEach(() => {
    ERASE_RETRY.pauseMs = pause;
  });

  test("the removal waits for an erase asked again to answer", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const second = Promise.withResolvers<Response>();
    let temp = "";
    let erases = 0;
    const fake = fakeServer(async (action, body) => {
      if (action === "save") temp = body.filename;
      if (action === "save" || ++erases === 1) throw new TypeError("fetch failed");
      return second.promise;
    });
    restore = () => fake.spy.mockRestore();
    const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1 });
    await saveUs(disk, launch);
    disk.removeSession("u", "s");
    // The next turn on the slot waits no longer than for the first erase.
    await launch.slots.workOn(0);
    // A bound only on when a regression shows: the second erase is asked within these turns.
    for (let t = 0; t < 200 && fake.asked.length < 3; t++) await new Promise((r) => setImmediate(r));
    fs.writeFileSync(join(dir.path, temp), TOKENS); // the queued save runs at last
    second.resolve(erased());
    await disk.zeroes.done();
    expect({ asked: fake.asked, left: fs.existsSync(join(dir.path, temp)) }).toEqual({
      asked: ["save", "erase", "erase"],
      left: false,
    });
  });

  test("it is asked ERASE_TRIES times at most, then the removal goes on", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    const fake = fakeServer(async () => {
      throw new TypeError("fetch failed");
    });
    restore = () => fake.spy.mockRestore();
    const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1 });
    await saveUs(disk, launch);
    disk.removeSession("u", "s");
    await disk.zeroes.done();
    expect(fake.asked).toEqual(["save", ...Array(ERASE_TRIES).fill("erase")]);
  });

  test("its server stopping meanwhile, the removal waits for the exit", async () => {
    using dir = tmpdir();
    const disk = new KvDisk(dir.path, 10_000_000);
    let temp = "";
    const fake = fakeServer(async (action, body) => {
      if (action === "save") temp = body.filename;
      throw new TypeError("fetch failed");
    });
    restore = () => fake.spy.mockRestore();
    ERASE_RETRY.pauseMs = 60_000; // the stop comes during the pause
    const died = new AbortController();
    const exit = Promise.withResolvers<void>();
    const launch = new Launch({
      baseUrl: "http://127.0.0.1:9",
      apiKey: "k",
      slots: 1,
      died,
      exited: exit.promise,
    });
    await saveUs(disk, launch);
    disk.removeSession("u", "s");
    await launch.slots.workOn(0);
    died.abort(new Error("llama-server was stopped (unload)"));
    fs.writeFileSync(join(dir.path, temp), TOKENS); // the save ends before the exit
    exit.resolve();
    await disk.zeroes.done();
    expect({ asked: fake.asked, left: fs.existsSync(join(dir.path, temp)) }).toEqual({
      asked: ["save", "erase"],
      left: false,
    });
  });
});
