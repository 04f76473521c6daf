import { expect, test } from "bun:test";
import { KeyedMutex } from "../../src/store/keyed-mutex.ts";

test("KeyedMutex forgets a key once nobody holds or waits for it, including after an abort", async () => {
  const m = new KeyedMutex();
  const never = new AbortController().signal;
  const unlock = await m.lock("s1", never);
  const ac = new AbortController();
  const waiting = m.lock("s1", ac.signal);
  expect(m.size).toBe(1);
  ac.abort(new Error("gone"));
  await expect(waiting).rejects.toThrow("gone");
  expect(m.size).toBe(1);
  unlock();
  unlock();
  expect(m.size).toBe(0);
  const again = await m.lock("s1", never);
  expect(m.size).toBe(1);
  again();
  expect(m.size).toBe(0);
});
