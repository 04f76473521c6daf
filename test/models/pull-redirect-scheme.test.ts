import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { blobPath } from "../../src/models/hf-cache.ts";
import { hubAccess, listRepoFiles } from "../../src/models/hub-listing.ts";
import { pullModel } from "../../src/models/pull.ts";
import type { CoreError } from "../../src/protocol/errors.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Bun's fetch reads file: URLs: a hub that redirects a download (or links a listing page) to
// file:///proc/self/fd/0 had the core read its own stdin, the host's protocol channel, and
// one that lists a local file's size and sha256 had it copied into the cache as the model.
// Only http and https are asked.

const COMMIT = "a".repeat(40);
const servers: { stop(force: boolean): unknown }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.stop(true);
});

/** A hub whose resolve redirects, and whose listing links, to `target`. */
function hubPointingAt(target: string, entry: object): string {
  const server = Bun.serve({
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path.includes("/revision/")) return Response.json({ sha: COMMIT });
      if (path.includes("/tree/") && new URL(req.url).searchParams.has("cursor"))
        return Response.json([entry]);
      if (path.includes("/tree/") && target.endsWith(".json"))
        return Response.json([], { headers: { link: `<${target}>; rel="next"` } });
      if (path.includes("/tree/")) return Response.json([entry]);
      return new Response(null, { status: 302, headers: { location: target } });
    },
  });
  servers.push(server);
  return `http://127.0.0.1:${server.port}`;
}

describe("the hub cannot send the core to a local file", () => {
  test("a download redirected to file: is refused; the local file is not copied in as the model", async () => {
    using dir = tmpdir("local-ai-scheme-");
    const local = join(dir.path, "private.gguf");
    const bytes = Buffer.from("a file of the user's, not the hub's");
    writeFileSync(local, bytes);
    const sha = createHash("sha256").update(bytes).digest("hex");
    const entry = {
      type: "file",
      path: "m-Q4_K_M.gguf",
      size: bytes.length,
      oid: "c".repeat(40),
      lfs: { oid: sha, size: bytes.length },
    };
    const cache = join(dir.path, "hub");
    const error = await pullModel(
      { repo: "org/evil", quant: "Q4_K_M", revision: "main" },
      {
        env: { HF_ENDPOINT: hubPointingAt(`file://${local}`, entry), HF_HUB_CACHE: cache },
        home: dir.path,
        freeSpace: () => 1024 ** 4,
      },
      { signal: new AbortController().signal, progress: () => {} },
    ).then(
      () => undefined,
      (err: CoreError) => err,
    );
    expect(error?.data).toMatchObject({ cause: "hub_error" });
    expect(error?.message).toContain("file:");
    expect(existsSync(blobPath(cache, "org/evil", sha))).toBe(false);
  });

  test("a listing page linked to file: is refused by the plan's listing too", async () => {
    using dir = tmpdir("local-ai-scheme-");
    const page = join(dir.path, "page.json");
    writeFileSync(page, JSON.stringify([{ type: "file", path: "local.gguf", size: 1 }]));
    const access = hubAccess({ HF_ENDPOINT: hubPointingAt(`file://${page}`, {}) }, dir.path);
    const error = await listRepoFiles(access, "org/evil", "main").then(
      (files) => files,
      (err: CoreError) => err,
    );
    expect((error as CoreError).data).toMatchObject({ problem: "hub_error" });
    expect((error as CoreError).message).toContain("file:");
  });
});
