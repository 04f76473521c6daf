import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { chat } from "../../src/methods/chat.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import type { LlamaProvider, StartTicket } from "../../src/runtime/endpoint.ts";
import { CoreServices } from "../../src/server/services.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A plain chat begins llama-server's start before the turn's own work (its modules, the
// database): docs/performance.md, "A cold chat's way to the spawn". A chat the params alone
// refuse (an image, a rewrite without its session) starts nothing.

function fixture(dataDir: string, ticket?: StartTicket, onTurnDeps?: () => void) {
  const seen: string[] = [];
  const provider: LlamaProvider = {
    prestart: () => {
      seen.push("prestart");
      return ticket;
    },
    acquire: () => Promise.reject(new Error("no server in this test")),
    slots: () => 1,
    stop: async () => {},
  };
  writeFileSync(join(dataDir, "config.yaml"), `app:\n  data_dir: ${JSON.stringify(dataDir)}\n`);
  const services = new CoreServices({ configPath: "config.yaml", cwd: dataDir, llama: () => provider });
  const store = services.store.bind(services);
  services.store = () => {
    if (!seen.includes("store")) seen.push("store");
    return store();
  };
  const reuse = services.promptReuse.bind(services);
  services.promptReuse = (name) => {
    onTurnDeps?.();
    return reuse(name);
  };
  const ctx = (signal: AbortSignal) =>
    ({
      id: "c",
      signal,
      emit: () => true,
      droppedEvents: 0,
      settle: () => true,
    }) as never;
  const run = (params: Record<string, unknown>, signal = new AbortController().signal) =>
    Promise.resolve()
      .then(() => chat.run(chat.params.parse({ input: "hi", ...params }), ctx(signal), services))
      .then(
        () => ({ code: "none" }),
        (e: { code?: string }) => e,
      );
  return { seen, run, stop: () => services.stop() };
}

describe("the chat method's start", () => {
  test("a plain chat begins the start before the turn opens the database", async () => {
    using dir = tmpdir();
    const f = fixture(dir.path);
    await f.run({});
    await f.stop();
    // The prompt reuse the chat makes first no longer opens the database before the start.
    expect(f.seen).toEqual(["prestart", "store"]);
  });

  test("an image refused, or a rewrite without its session, starts nothing", async () => {
    using dir = tmpdir();
    const f = fixture(dir.path);
    const image = await f.run({ images: [{ data: "not base64!" }] });
    expect(image.code).toBe("invalid_request");
    const rewrite = await f.run({ input: "", regenerate: true });
    expect(rewrite.code).toBe("invalid_request");
    expect(f.seen).toEqual([]);
    await f.stop();
  });

  test("a resume's image refused, where it runs as a new turn, starts nothing either", async () => {
    // A resume's images are judged once its session's place is held (ignored where it resumes):
    // the start was begun before that, a refused image costing a model load (or a swap).
    using dir = tmpdir();
    const f = fixture(dir.path);
    const refused = await f.run({ session_id: "s", resume: true, images: [{ data: "not base64!" }] });
    expect(refused.code).toBe("invalid_request");
    expect(f.seen).not.toContain("prestart");
    await f.stop();
  });
});

describe("the chat's wait for the spawn", () => {
  test("a cancel while the start has not spawned ends the chat before its turn begins", async () => {
    // The turn's modules load once llama-server is spawned (at most 250 ms later); a cancel
    // meanwhile is answered at once, the database never opened for it.
    using dir = tmpdir();
    const f = fixture(dir.path, { spawned: new Promise<void>(() => {}) });
    const abort = new AbortController();
    const ended = f.run({}, abort.signal);
    await Bun.sleep(5);
    abort.abort(new CoreError("cancelled", "cancelled by the host"));
    expect((await ended).code).toBe("cancelled");
    expect(f.seen).toEqual(["prestart"]);
    await f.stop();
  });

  test("the turn begins once the start has spawned", async () => {
    using dir = tmpdir();
    const spawned = Promise.withResolvers<void>();
    const f = fixture(dir.path, { spawned: spawned.promise });
    const ended = f.run({});
    await Bun.sleep(5);
    expect(f.seen).toEqual(["prestart"]);
    spawned.resolve();
    await ended;
    expect(f.seen).toEqual(["prestart", "store"]);
    await f.stop();
  });

  test("a cancel once the start has spawned, before the turn's first step, opens no database", async () => {
    // The cancel comes while the turn's modules load (a cold chat's ~20 ms): the wait for the
    // spawn is over, and the turn went on to open the database and ask for the session's lease.
    using dir = tmpdir();
    const abort = new AbortController();
    const f = fixture(dir.path, { spawned: Promise.resolve() }, () =>
      abort.abort(new CoreError("cancelled", "cancelled by the host")),
    );
    expect((await f.run({}, abort.signal)).code).toBe("cancelled");
    expect(f.seen).toEqual(["prestart"]);
    await f.stop();
  });
});
