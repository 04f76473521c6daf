import { expect, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import { watchLateTemp } from "../../src/agent/kv/kv-temps.ts";
import { ShutdownOrder } from "../../src/server/shutdown-order.ts";
import { kvEraseOf } from "../fixtures/slot-save.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Shutdown's "KV state zeroing" step (services.ts) and a late save's file (kv-temps.ts
// `watchLateTemp`) removed at its server's exit: the removal's zeroing must be under way before
// the step waits for the zeroings. llama-server's stop is a stand-in whose exit is seen just after
// it returns; the folder's zeroings are watched.

const TOKENS = "tokens of my secret diagnosis\n";

test("a late save's file removed at the server's exit is zeroed before shutdown ends", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 10_000_000);
  const erase = kvEraseOf(dir.path, disk);
  const name = "late.tmp";
  fs.writeFileSync(join(dir.path, name), TOKENS);
  const seen: string[] = [];
  const { zero, done } = disk.zeroes;
  disk.zeroes.zero = (fd, path) => {
    seen.push("zeroing under way");
    zero.call(disk.zeroes, fd, path);
  };
  disk.zeroes.done = () => {
    seen.push("zeroings waited for");
    return done.call(disk.zeroes);
  };
  const exit = Promise.withResolvers<void>();
  watchLateTemp(
    join(dir.path, name),
    exit.promise,
    () => disk.discard(name),
    async () => false,
    disk.zeroes,
  );
  const order = new ShutdownOrder();
  order.add("KV state zeroing", null, () => erase.atShutdown());
  order.add("llama", null, async () => {
    setTimeout(exit.resolve, 1);
  });
  await order.stop();
  expect(fs.existsSync(join(dir.path, name))).toBe(false);
  expect(seen).toEqual(["zeroing under way", "zeroings waited for"]);
});
