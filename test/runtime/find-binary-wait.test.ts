import { describe, expect, test } from "bun:test";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, rejection } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

// findBinary asks each place of llama-server of its drive first (config/find-binary-asked.ts):
// on a network share gone offline each lookup waits out a stat's wait (30 s). The stand-in here
// is a lookup that never answers, as a hard-mounted share's stat does not.
describe.skipIf(process.platform === "win32")("a start whose binary lookup waits on a dead drive", () => {
  test("a stop during the lookup ends the start at once: shutdown did not wait for the drive", async () => {
    await using dir = tmpdir();
    let asked!: () => void;
    const lookup = new Promise<void>((r) => {
      asked = r;
    });
    const { supervisor } = makeSupervisor(dir.path, {
      options: {
        findBinary: () => {
          asked();
          return new Promise(() => {});
        },
      },
    });
    const start = rejection(supervisor.acquire(never()));
    await lookup;
    await supervisor.stop();
    expect((await start).message).toContain("shutting down");
  }, 5000);

  test("the reap and the plan share one lookup: a dead drive was waited for twice per start", async () => {
    await using dir = tmpdir();
    let lookups = 0;
    const { supervisor } = makeSupervisor(dir.path, {
      options: {
        reap: true,
        findBinary: () => {
          lookups++;
          return Promise.resolve({
            tried: ["/mnt/share/llama-server"],
            late: "/mnt/share/llama-server: dead",
          });
        },
      },
    });
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("binary_missing");
    expect(err.message).toContain("not looked at from /mnt/share/llama-server: dead");
    expect(lookups).toBe(1);
  });
});
