import { afterEach, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import type { Supervisor } from "../../src/runtime/supervisor.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

// A stop (the core shutting down, a model switched) while a start still asked the binary which
// memory flags it takes (`--help`, up to 10 s on a cold disk): the start went on to spawn
// llama-server, only for the launch's health wait to SIGKILL it at once, with its pid record,
// log header and a GPU backend's initialisation for nothing, after the core was told to stop.

const stops: Supervisor[] = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s.stop();
});

test("a stop during the start's --help probe spawns no llama-server", async () => {
  using dir = tmpdir();
  let spawned = 0;
  let stopping: Promise<void> | undefined;
  const h = makeSupervisor(dir.path, {
    // --no-mmap: a plan with memory flags asks the binary for its dialect (load-mode.ts).
    plan: { mmap: false },
    options: {
      loadMode: async () => {
        stopping = h.supervisor.stop();
        return false;
      },
      spawner: (req) => {
        spawned++;
        return bunSpawner(req);
      },
    },
  });
  stops.push(h.supervisor);
  const err = await h.supervisor.acquire(new AbortController().signal).then(
    () => null,
    (e: unknown) => e,
  );
  await stopping;
  expect(err).toBeInstanceOf(CoreError);
  expect((err as CoreError).code).toBe("cancelled");
  expect(spawned).toBe(0);
});

// The plan itself runs long where a device listing (5 s) or a big model's header on a slow disk
// (a dead share: 30 s before `unreadable`) is asked: a stop waited for it before the start gave
// up, the core's shutdown and a model's unload with it. A stop gives up the plan's wait at once;
// its answer, coming later, is discarded and spawns nothing.
test("a stop during the plan itself gives up its wait and spawns nothing", async () => {
  using dir = tmpdir();
  let spawned = 0;
  let planned: () => void = () => {};
  const asked = new Promise<void>((go) => {
    planned = go;
  });
  const h = makeSupervisor(dir.path, {
    options: {
      plan: () => {
        planned();
        return new Promise(() => {}); // a header read on a share gone dead
      },
      spawner: (req) => {
        spawned++;
        return bunSpawner(req);
      },
    },
  });
  const start = h.supervisor.acquire(new AbortController().signal).then(
    () => null,
    (e: unknown) => e,
  );
  await asked;
  await h.supervisor.stop();
  const err = await start;
  expect((err as CoreError).code).toBe("cancelled");
  expect(spawned).toBe(0);
}, 3000);
