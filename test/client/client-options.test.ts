import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join, relative } from "node:path";
import { LocalAiClient, type LocalAiClientOptions } from "../../src/client/index.ts";
import { Restarts, restartOptions } from "../../src/client/restarts.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// The options a host creates the client with, filled from its own settings: checked as strictly
// as a call's (call-options.test.ts).
afterEach(killFakes);

/** A FakeChild that answers every request; how many were spawned. */
function core() {
  const spawned: FakeChild[] = [];
  const spawn = () => {
    const child = new FakeChild();
    spawned.push(child);
    return child;
  };
  return { spawned, spawn };
}

const BAD: [string, Partial<LocalAiClientOptions>, string][] = [
  // Before: the default, 60 s, without a word.
  ["requestTimeoutMs", { requestTimeoutMs: "30000" as never }, "a string"],
  // Before: coerced by setTimeout.
  ["streamTimeoutMs", { streamTimeoutMs: "1000" as never }, "a string"],
  // Before: no limit at all.
  ["requestTimeoutMs", { requestTimeoutMs: -1 }, "-1"],
  ["streamTimeoutMs", { streamTimeoutMs: -5000 }, "-5000"],
  // Before: every event, every line from the core dropped.
  ["maxBufferedEvents", { maxBufferedEvents: -1 }, "-1"],
  ["maxLineBytes", { maxLineBytes: -1 }, "-1"],
  ["maxLineBytes", { maxLineBytes: 0 }, "0"],
  ["stderrTailLines", { stderrTailLines: "50" as never }, "a string"],
  // Before: no bound, held for the core's whole life: every stderr line kept, or a line with no
  // end (a foreign binary's, `cat /dev/zero`) read into memory until the host ran out.
  ["stderrTailLines", { stderrTailLines: Number.POSITIVE_INFINITY }, "Infinity"],
  ["maxLineBytes", { maxLineBytes: Number.POSITIVE_INFINITY }, "Infinity"],
  ["stopGraceMs", { stopGraceMs: -3000 }, "-3000"],
  ["restart", { restart: "yes" as never }, "a string"],
  // Before: taken as an object of defaults, so a host's `restart: []` (a list slipped in from a
  // settings file) turned restarts on without a word.
  ["restart", { restart: [] as never }, "an array"],
  // Before: a negative delay restarted at once.
  ["restart.initialDelayMs", { restart: { initialDelayMs: -500 } }, "-500"],
  ["restart.maxDelayMs", { restart: { maxDelayMs: "10s" as never } }, "a string"],
  ["restart.maxRestarts", { restart: { maxRestarts: -1 } }, "-1"],
  // Before: every exit reset the count, so a core crashing after its handshake restarted forever.
  ["restart.resetAfterMs", { restart: { resetAfterMs: 0 } }, "0"],
  // Before: accepted, and as good as 0: the handshake alone outlasts a millisecond.
  ["restart.resetAfterMs", { restart: { resetAfterMs: 1 } }, "1"],
  ["restart.resetAfterMs", { restart: { resetAfterMs: 999 } }, "999"],
  ["restart.resetAfterMs", { restart: { resetAfterMs: Number.NEGATIVE_INFINITY } }, "-Infinity"],
];

// A plain-JS host's options of the wrong type: before, each was taken, to fail later where it was
// used (spawn's TypeError as a core_exited, a callback's TypeError as a logger warning on every
// call of it, a number coerced into the core's environment) or to count oddly (2.5 restarts).
const WRONG_TYPE: [string, Record<string, unknown>, string][] = [
  ["binary", { binary: undefined }, "undefined"],
  ["binary", { binary: 42 }, "a number"],
  ["binary", { binary: "" }, "empty"],
  ["binary", { binary: "local-ai\0" }, "NUL"],
  ["config", { config: ["a.yaml"] }, "an array"],
  ["cwd", { cwd: 1 }, "a number"],
  ["args", { args: "serve-stdio" }, "a string"],
  ["args[1]", { args: ["serve-stdio", 7] }, "a number"],
  ["env", { env: "PATH=/bin" }, "a string"],
  ["env.PORT", { env: { PORT: 8080 } }, "a number"],
  ["env.HOME", { env: { HOME: null } }, "null"],
  // Before: taken, and spawn's TypeError (ERR_INVALID_ARG_VALUE) came back as a core_exited.
  ["env", { env: { "A\0B": "1" } }, "NUL"],
  // Before: taken, and spawn read none of its entries: the core ran with no environment at all.
  ["env", { env: new Map([["PATH", "/bin"]]) }, "a Map"],
  ["initialize", { initialize: "v1" }, "a string"],
  ["logger", { logger: console.warn }, "a function"],
  ["logger.warn", { logger: { debug: () => {} } }, "undefined"],
  ["logger.debug", { logger: { warn: () => {}, debug: "yes" } }, "a string"],
  ["onStderr", { onStderr: "log" }, "a string"],
  ["onExit", { onExit: {} }, "an object"],
  ["onRestart", { onRestart: true }, "a boolean"],
  ["onFailed", { onFailed: "alert" }, "a string"],
  ["spawn", { spawn: "node" }, "a string"],
  ["restart.maxRestarts", { restart: { maxRestarts: 2.5 } }, "2.5"],
  ["maxBufferedEvents", { maxBufferedEvents: 0.5 }, "0.5"],
  ["stderrTailLines", { stderrTailLines: 10.5 }, "10.5"],
];

describe("options of the wrong type, and the right ones", () => {
  test("options that are not an object: start() rejects naming them, nothing thrown", async () => {
    for (const given of [undefined, null, "local-ai"]) {
      const err = await rejection(LocalAiClient.start(given as unknown as LocalAiClientOptions));
      expect(err.code).toBe("invalid_request");
      expect(err.data).toEqual({ field: "options" });
    }
  });

  test("the right types start the core: an unset env value, a logger without debug", async () => {
    const { spawned, spawn } = core();
    const fn = () => {};
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        config: "c.yaml",
        cwd: "/",
        args: ["serve-stdio"],
        env: { PATH: "/bin", UNSET: undefined },
        initialize: { protocol_versions: [1] },
        logger: { warn: fn },
        onStderr: fn,
        onExit: fn,
        onRestart: fn,
        onFailed: fn,
        restart: { maxRestarts: 2 },
      }),
    );
    expect(client.running).toBe(true);
    expect(spawned).toHaveLength(1);
  });
});

describe("an empty config or cwd, a settings field left blank", () => {
  test("is none, as before; with a bare binary name the host is warned of its folder's config.yaml", async () => {
    // Before c78f8521 `config: ""` meant no --config (`options.config ? …`) and `cwd: ""` the host's
    // folder (Node's spawn takes an empty cwd as none); then both refused start(), as a host's
    // `config: process.env.LOCAL_AI_CONFIG` set blank (examples/node-host does just that) did.
    // A bare name is found on PATH: no folder of its own to run in, so the host's stays, said.
    const seen: { command: string; args: string[]; cwd: unknown }[] = [];
    const warned: string[] = [];
    const child = new FakeChild();
    const spawn = (command: string, args: string[], options: { cwd?: string }) => {
      seen.push({ command, args, cwd: options.cwd });
      return child;
    };
    const logger = { warn: (m: string) => warned.push(m) };
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn, config: "", cwd: "", logger }),
    );
    expect(client.running).toBe(true);
    expect(seen).toEqual([{ command: "local-ai", args: ["serve-stdio"], cwd: undefined }]);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toContain("config.yaml");
    expect(warned[0]).toContain("name config or cwd");
    const err = await rejection(LocalAiClient.start({ binary: "", spawn }));
    expect(err.data).toEqual({ field: "binary" });
  });
});

describe("no config, cwd or args: the core never reads an unnamed folder's config.yaml", () => {
  // The core reads config.yaml from its working folder: spawned in the host's, a host started in
  // a downloaded folder ran whatever that folder's config.yaml named (`llama.binary: ./evil.sh`
  // ran at doctor). The binary's own folder is as trusted as the binary.
  function recorder() {
    const seen: { command: string; args: string[]; cwd: unknown }[] = [];
    const spawn = (command: string, args: string[], options: { cwd?: string }) => {
      seen.push({ command, args, cwd: options.cwd });
      return new FakeChild();
    };
    return { seen, spawn };
  }

  test("a binary path runs in the binary's folder, by its absolute path; config or cwd given stay the host's", async () => {
    await using dir = tmpdir();
    const bin = join(dir.path, "bin");
    mkdirSync(bin);
    const { seen, spawn } = recorder();
    const binary = join(bin, "local-ai");
    track(await LocalAiClient.start({ binary, spawn }));
    // A relative one too: spawn resolves a relative command against the cwd it is given.
    track(await LocalAiClient.start({ binary: relative(process.cwd(), binary), spawn }));
    track(await LocalAiClient.start({ binary, spawn, config: "c.yaml" }));
    track(await LocalAiClient.start({ binary, spawn, cwd: dir.path }));
    track(await LocalAiClient.start({ binary, spawn, args: ["serve-stdio"] }));
    expect(seen).toEqual([
      { command: binary, args: ["serve-stdio"], cwd: bin },
      { command: binary, args: ["serve-stdio"], cwd: bin },
      { command: binary, args: ["serve-stdio", "--config", "c.yaml"], cwd: undefined },
      { command: binary, args: ["serve-stdio"], cwd: dir.path },
      { command: binary, args: ["serve-stdio"], cwd: undefined },
    ]);
  });

  test("a binary whose folder is not there keeps the host's: spawn names the binary, not a cwd", async () => {
    await using dir = tmpdir();
    const { seen, spawn } = recorder();
    const binary = join(dir.path, "gone", "local-ai");
    track(await LocalAiClient.start({ binary, spawn }));
    expect(seen).toEqual([{ command: binary, args: ["serve-stdio"], cwd: undefined }]);
  });
});

describe("a client option of a wrong type or out of range", () => {
  for (const [field, given, shown] of [...BAD, ...WRONG_TYPE]) {
    test(`${field} ${shown}: start() rejects with invalid_request naming it, no core spawned`, async () => {
      const { spawned, spawn } = core();
      const options = { binary: "local-ai", spawn, ...given } as unknown as LocalAiClientOptions;
      const err = await rejection(LocalAiClient.start(options));
      expect(err.code).toBe("invalid_request");
      expect(err.message).toContain(field);
      expect(err.message).toContain(shown);
      expect(err.data).toEqual({ field });
      expect(spawned).toHaveLength(0);
    });
  }

  test("the client made with it never spawns: start() again and its calls fail the same way", async () => {
    const { spawned, spawn } = core();
    const client = track(new LocalAiClient({ binary: "local-ai", spawn, requestTimeoutMs: -1 }));
    expect((await rejection(client.start())).code).toBe("invalid_request");
    expect((await rejection(client.start())).code).toBe("invalid_request");
    const err = await rejection(client.ping());
    expect(err.code).toBe("invalid_request");
    expect(err.method).toBe("ping");
    expect(spawned).toHaveLength(0);
  });
});

describe("client options within range", () => {
  test("0, Infinity, NaN and null start the core", async () => {
    const { spawned, spawn } = core();
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        requestTimeoutMs: 0,
        streamTimeoutMs: Number.POSITIVE_INFINITY,
        maxBufferedEvents: 0,
        maxLineBytes: Number.NaN,
        stderrTailLines: null as never,
        stopGraceMs: Number.POSITIVE_INFINITY,
        restart: { maxRestarts: Number.POSITIVE_INFINITY, initialDelayMs: 0, resetAfterMs: Number.NaN },
      }),
    );
    expect(client.running).toBe(true);
    expect(spawned).toHaveLength(1);
  });

  test("restart.resetAfterMs of 1000 and Infinity (never reset) start the core", async () => {
    for (const resetAfterMs of [1000, Number.POSITIVE_INFINITY]) {
      const { spawned, spawn } = core();
      const client = track(
        await LocalAiClient.start({ binary: "local-ai", spawn, restart: { resetAfterMs } }),
      );
      expect(client.running).toBe(true);
      expect(spawned).toHaveLength(1);
    }
  });

  test("restart delays of Infinity are the longest a timer holds, never an immediate restart", () => {
    const delays = (initialDelayMs: number, maxDelayMs: number) => {
      const restarts = new Restarts(restartOptions({ initialDelayMs, maxDelayMs, maxRestarts: 3 }));
      return [restarts.next().delayMs, restarts.next().delayMs];
    };
    const inf = Number.POSITIVE_INFINITY;
    expect(delays(inf, inf)).toEqual([2 ** 31 - 1, 2 ** 31 - 1]);
    expect(delays(500, inf)).toEqual([500, 1000]);
    expect(delays(inf, 10_000)).toEqual([10_000, 10_000]);
  });
});
