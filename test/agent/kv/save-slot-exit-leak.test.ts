import { afterEach, expect, spyOn, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { EXIT_WAIT_MS } from "../../../src/agent/kv/slot-clear.ts";
import { neverExiting, savedNothing, saveUs, shutdownWaitEnds } from "../../fixtures/slot-save.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A save listens for its server's stop (`died`) and, once told, waits for the exit (slot-clear.ts
// `exitSeen`: a 60 s timer, and a place in shutdown's wait). Many saves on one server left nothing
// of that behind once over, whichever way they ended (save-slot.ts). llama-server is an injected `fetch`.

let restore: (() => void) | undefined;
afterEach(() => {
  restore?.();
  restore = undefined;
});

/** What `died` holds of the saves (listeners not yet told), and the exit waits' timers running. */
function counted(died: AbortController) {
  const listeners = new Set<unknown>();
  const add = died.signal.addEventListener.bind(died.signal);
  const remove = died.signal.removeEventListener.bind(died.signal);
  died.signal.addEventListener = ((type: string, fn: EventListener, o?: AddEventListenerOptions) => {
    listeners.add(fn);
    add(type, fn, o);
  }) as typeof died.signal.addEventListener;
  died.signal.removeEventListener = ((type: string, fn: EventListener) => {
    listeners.delete(fn);
    remove(type, fn);
  }) as typeof died.signal.removeEventListener;
  // Told once (each `once`): none is held past the stop.
  add("abort", () => listeners.clear());
  const timers = new Set<unknown>();
  const set = spyOn(globalThis, "setTimeout").mockImplementation(((fn: () => void, ms?: number) => {
    const id = realSet(fn, ms);
    if (ms === EXIT_WAIT_MS) timers.add(id);
    return id;
  }) as typeof setTimeout);
  const clear = spyOn(globalThis, "clearTimeout").mockImplementation(((
    id: Parameters<typeof clearTimeout>[0],
  ) => {
    timers.delete(id);
    return realClear(id);
  }) as typeof clearTimeout);
  const undo = () => {
    set.mockRestore();
    clear.mockRestore();
  };
  return { listeners, timers, undo };
}
const realSet = globalThis.setTimeout;
const realClear = globalThis.clearTimeout;

test("100 saves answered, on a live server and on one stopping, leave no listener, timer or exit wait", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const fetchSpy = spyOn(globalThis, "fetch").mockImplementation((async () =>
    savedNothing()) as unknown as typeof fetch);
  const died = new AbortController();
  const count = counted(died);
  restore = () => {
    fetchSpy.mockRestore();
    count.undo();
  };
  const launch = neverExiting(died);
  for (let i = 0; i < 50; i++) await saveUs(disk, launch);
  expect(count.listeners.size).toBe(0);
  died.abort(new Error("stopping"));
  for (let i = 0; i < 50; i++) await saveUs(disk, launch);
  expect(count.listeners.size).toBe(0);
  expect(count.timers.size).toBe(0);
  expect(await shutdownWaitEnds()).toBe(true);
  await disk.zeroes.done();
});
