import { expect, test } from "bun:test";
import type { SearchHit } from "../../src/store/session-search.ts";
import { ChatHarness } from "../agent/harness.ts";

// A search runs on the store's thread: on a huge database, or with SQLite's LIKE match where it
// has no FTS5, it takes seconds, and the core's stop waited for it, past the host's wait (stop
// grace + 5 s), which then killed the core with llama-server running. `cancel` cannot reach it.
test("a shutdown answers a search still under way after its grace cancelled, and cancel cannot reach it", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  const store = h.services.store();
  let asked!: () => void;
  const searching = new Promise<void>((r) => {
    asked = r;
  });
  let answer!: (hits: SearchHit[]) => void;
  // The thread's scan, held until the test lets it answer.
  store.search = () => {
    asked();
    return new Promise<SearchHit[]>((r) => {
      answer = r;
    });
  };
  h.send("s", "sessions.search", { query: "hello" });
  await searching;
  h.send("c", "cancel", { request_id: "s" });
  expect(await h.terminal("c")).toMatchObject({ result: { cancelled: false } });
  // The stop's grace (STOP_GRACE_MS) taken as over: a search still under way then is ended.
  const stopped = h.stopRequests(0);
  // The scan ends only after the stop began: the stop must not have waited for it.
  answer([{ session_id: "s", seq: 0, title: "t", snippet: "**hello**" }]);
  await stopped;
  expect(await h.terminal("s")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
});
