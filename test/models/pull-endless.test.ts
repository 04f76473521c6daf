import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { hubAccess, listRepoFiles } from "../../src/models/hub-listing.ts";
import { type PullDeps, pullModel } from "../../src/models/pull.ts";
import type { CoreError } from "../../src/protocol/errors.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A hub whose answers never end: an error page, a listing page, listing pages that link to
// themselves. The core reads a bounded amount of each and says what was wrong; it does not
// hold the whole answer in memory until a time limit (30 s for the API, 60 s for a download)
// happens to stop it. The stand-in hub serves only well-formed bodies, so this one is bespoke.

const COMMIT = "a".repeat(40);
const SHA = "b".repeat(64);
const ENTRY = {
  type: "file",
  path: "m-Q4_K_M.gguf",
  size: 10,
  oid: "c".repeat(40),
  lfs: { oid: SHA, size: 10 },
};

/** A body of `piece` repeated without end, 64 KiB each millisecond or so (bounded by backpressure). */
function endless(head: string, piece: string): ReadableStream<Uint8Array> {
  const chunk = new TextEncoder().encode(piece.repeat(Math.ceil(65536 / piece.length)));
  let first = true;
  return new ReadableStream({
    async pull(c) {
      if (first) c.enqueue(new TextEncoder().encode(head));
      first = false;
      await Bun.sleep(1);
      c.enqueue(chunk);
    },
  });
}

type Mode = "error-page" | "listing" | "page-loop" | "relative-next";
const servers: { stop(force: boolean): unknown }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop(true);
});

function hostileHub(mode: Mode) {
  const server = Bun.serve({
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path.includes("/revision/")) return Response.json({ sha: COMMIT });
      if (path.includes("/tree/") && mode === "listing")
        return new Response(endless("[", `${JSON.stringify(ENTRY)},`), {
          headers: { "content-type": "application/json" },
        });
      if (path.includes("/tree/") && mode === "page-loop")
        return Response.json([ENTRY], { headers: { link: `<${req.url}>; rel="next"` } });
      if (path.includes("/tree/") && mode === "relative-next") {
        // A relative next link, as RFC 8288 allows: resolved against the page that gave it.
        if (new URL(req.url).searchParams.get("cursor") === "2")
          return Response.json([{ ...ENTRY, path: "second.gguf" }]);
        return Response.json([ENTRY], { headers: { link: `<${path}?recursive=true&cursor=2>; rel="next"` } });
      }
      if (path.includes("/tree/")) return Response.json([ENTRY]);
      return new Response(endless("<html>", "<p>Service Unavailable</p>"), { status: 503 });
    },
  });
  servers.push(server);
  return `http://127.0.0.1:${server.port}`;
}

async function pullFrom(mode: Mode, limitMs: number) {
  using dir = tmpdir("local-ai-endless-");
  const deps: PullDeps = {
    env: { HF_ENDPOINT: hostileHub(mode), HF_HUB_CACHE: join(dir.path, "hub") },
    home: dir.path,
    freeSpace: () => 1024 ** 4,
    stallMs: limitMs,
    apiTimeoutMs: limitMs,
  };
  const t0 = performance.now();
  try {
    await pullModel({ repo: "org/evil", quant: "Q4_K_M", revision: "main" }, deps, {
      signal: new AbortController().signal,
      progress: () => {},
    });
    return { ms: performance.now() - t0, error: undefined };
  } catch (err) {
    return { ms: performance.now() - t0, error: err as CoreError };
  }
}

describe("a hub answer that never ends is read only so far", () => {
  test("an error page without end: the status is reported at once, not after the stall limit", async () => {
    const r = await pullFrom("error-page", 8000);
    expect(r.error?.data).toMatchObject({ cause: "hub_error", http_status: 503 });
    expect(r.ms).toBeLessThan(4000);
  });

  test("a listing page without end is refused as too large, not read until the API time limit", async () => {
    // The message is the proof, not a clock: the time limit ends it with another. Reading the
    // 64 MiB took over 4 s on a busy box, so the limit is past the test's own.
    const r = await pullFrom("listing", 60_000);
    expect(r.error?.data).toMatchObject({ cause: "hub_error" });
    expect(r.error?.message).toContain("the hub's file listing is larger than 64 MiB");
  });

  test("listing pages that link back to themselves are refused, not taken as a listing", async () => {
    const r = await pullFrom("page-loop", 8000);
    expect(r.error?.data).toMatchObject({ cause: "hub_error" });
    expect(r.error?.message).toContain("the hub's file listing links back to a page it already gave");
  });
});

describe("the listing a plan reads of a model not pulled yet is bounded the same way", () => {
  async function listFrom(mode: Mode) {
    using dir = tmpdir("local-ai-endless-");
    // Past the test's own limit: the message, not a clock, shows which bound ended it.
    const access = { ...hubAccess({ HF_ENDPOINT: hostileHub(mode) }, dir.path), timeoutMs: 60_000 };
    const t0 = performance.now();
    const error = await listRepoFiles(access, "org/evil", "main").then(
      () => undefined,
      (err: CoreError) => err,
    );
    return { ms: performance.now() - t0, error };
  }

  test("a listing page without end is refused as too large, at once", async () => {
    const r = await listFrom("listing");
    expect(r.error?.data).toMatchObject({ problem: "hub_error", repo: "org/evil" });
    expect(r.error?.message).toContain("the hub's file listing is larger than 64 MiB");
  });

  test("a relative next link is followed from the page that gave it", async () => {
    using dir = tmpdir("local-ai-endless-");
    const access = hubAccess({ HF_ENDPOINT: hostileHub("relative-next") }, dir.path);
    const files = await listRepoFiles(access, "org/evil", "main");
    expect(files.map((f) => f.path)).toEqual([ENTRY.path, "second.gguf"]);
  });

  test("pages that link back to themselves are refused, not read a hundred times and taken", async () => {
    const r = await listFrom("page-loop");
    expect(r.error?.data).toMatchObject({ problem: "hub_error" });
    expect(r.error?.message).toContain("the hub's file listing links back to a page it already gave");
  });
});
