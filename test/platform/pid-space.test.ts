import { expect, test } from "bun:test";
import { cachedSpace, pidSpace } from "../../src/platform/pid-space.ts";

// A passing failure to read the boot id or the pid namespace (too many open files at that
// moment) was kept for the core's life: its pid space wrong until it restarted, its own space's
// lease holders judged foreign, or another space's as its own (docs/agent.md, "Two cores on one
// data folder").

const fail = (code: string) => Object.assign(new Error(code), { code });

test("a passing read failure is not kept: the space is read again next time", () => {
  let reads = 0;
  let failing = true;
  const space = cachedSpace(
    [
      () => "boot",
      () => {
        reads++;
        if (failing) throw fail("EMFILE");
        return "pid:[4026531836]";
      },
    ],
    () => "host",
  );
  const partial = space();
  failing = false;
  const whole = space();
  expect(whole).not.toBe(partial);
  expect([space(), reads]).toEqual([whole, 2]);
});

test("a file the OS does not have is read once, its part empty for good", () => {
  let reads = 0;
  const space = cachedSpace(
    [
      () => {
        reads++;
        throw fail("ENOENT");
      },
    ],
    () => "host",
  );
  expect([space(), space(), reads]).toEqual([space(), space(), 1]);
  expect(pidSpace()).toMatch(/^[0-9a-f]{12}$/);
});
