import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { chat } from "../../src/methods/chat.ts";
import type { LlamaProvider } from "../../src/runtime/endpoint.ts";
import { CoreServices } from "../../src/server/services.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A plain chat begins llama-server's start before the turn's own work (its modules, the
// database): docs/performance.md, "A cold chat's way to the spawn". A chat the params alone
// refuse (an image, a rewrite without its session) starts nothing.

function fixture(dataDir: string) {
  const seen: string[] = [];
  const provider: LlamaProvider = {
    prestart: () => {
      seen.push("prestart");
      return undefined;
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
  const ctx = {
    id: "c",
    signal: new AbortController().signal,
    emit: () => true,
    droppedEvents: 0,
    settle: () => true,
  } as never;
  const run = (params: Record<string, unknown>) =>
    Promise.resolve()
      .then(() => chat.run(chat.params.parse({ input: "hi", ...params }), ctx, services))
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
