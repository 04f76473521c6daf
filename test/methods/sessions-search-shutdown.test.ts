import { expect, test } from "bun:test";
import type { SearchHit } from "../../src/store/session-search.ts";
import { ChatHarness } from "../agent/harness.ts";

/** A harness whose store's search is held until the test answers it, and the signal it was given. */
async function heldSearch(h: ChatHarness) {
  const store = h.services.store();
  let asked!: (signal: AbortSignal | undefined) => void;
  const searching = new Promise<AbortSignal | undefined>((r) => {
    asked = r;
  });
  let answer!: (hits: SearchHit[]) => void;
  // The thread's scan, held until the test lets it answer.
  store.search = (_u, _q, _l, signal) => {
    asked(signal);
    return new Promise<SearchHit[]>((r) => {
      answer = r;
    });
  };
  h.send("s", "sessions.search", { query: "hello" });
  const signal = await searching;
  return { signal, answer: (hits: SearchHit[]) => answer(hits) };
}

const HIT: SearchHit = { session_id: "s", seq: 0, title: "t", snippet: "**hello**" };

// A search's scan takes seconds on a huge database, or with SQLite's LIKE match (no FTS5, or a
// word of Chinese, Japanese, Thai…): `cancel` could not reach it, so a host that moved on (the
// user typed another letter) waited behind it, each search queued on the one thread.
test("cancel answers a search under way at once, cancelled, and tells its scan to stop", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const held = await heldSearch(h);
  h.send("c", "cancel", { request_id: "s" });
  expect(await h.terminal("c")).toMatchObject({ result: { cancelled: true } });
  // Answered while the scan is still held: the core does not wait for it.
  expect(await h.terminal("s")).toMatchObject({ code: "cancelled", message: "cancelled by the host" });
  expect(held.signal?.aborted).toBe(true);
  held.answer([HIT]);
});

// On a huge database, or with the LIKE match, a search takes seconds, and the core's stop waited
// for it, past the host's wait (stop grace + 5 s), which then killed the core with llama-server running.
test("a shutdown answers a search still under way after its grace cancelled, and tells its scan to stop", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const held = await heldSearch(h);
  // The stop's grace (STOP_GRACE_MS) taken as over: a search still under way then is ended.
  await h.stopRequests(0);
  expect(await h.terminal("s")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
  expect(held.signal?.aborted).toBe(true);
  held.answer([HIT]);
});

test("a search under way as the stop begins is not cancelled then: a script's search piped with its EOF is answered", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const held = await heldSearch(h);
  const stopped = h.stopRequests();
  expect(held.signal?.aborted).toBe(false);
  held.answer([HIT]);
  await stopped;
  expect(await h.terminal("s")).toMatchObject({ result: { hits: [HIT] } });
});

// SPEC's `cancel` without `request_id` means the one chat active: a search beside it (a host's
// search-as-you-type while a reply streams) made that cancel ambiguous, `invalid_request`, and the
// chat went on. A search is cancelled by its id only.
test("a cancel without request_id does not take a search: it is cancelled by its id only", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const held = await heldSearch(h);
  h.send("c", "cancel", {});
  expect(await h.terminal("c")).toMatchObject({ result: { cancelled: false } });
  expect(held.signal?.aborted).toBe(false);
  held.answer([HIT]);
  expect(await h.terminal("s")).toMatchObject({ result: { hits: [HIT] } });
});

// A search first waits for a 0.1 folder's import (minutes for years of chats): a cancel then was
// answered cancelled: true, but the search itself only once the import had ended.
test("cancel answers a search still waiting for the 0.1 import at once, cancelled", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const store = h.services.store();
  let waiting!: () => void;
  const reached = new Promise<void>((r) => {
    waiting = r;
  });
  let imported!: () => void;
  const importing = new Promise<void>((r) => {
    imported = r;
  });
  store.whenImported = () => {
    waiting();
    return importing;
  };
  h.send("s", "sessions.search", { query: "hello" });
  await reached;
  h.send("c", "cancel", { request_id: "s" });
  expect(await h.terminal("c")).toMatchObject({ result: { cancelled: true } });
  // Answered while the import is still under way.
  expect(await h.terminal("s")).toMatchObject({ code: "cancelled", message: "cancelled by the host" });
  imported();
});
