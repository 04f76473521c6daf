import { describe, expect, test } from "bun:test";
import { HubClient } from "../../src/models/hub-client.ts";
import { listRepoFiles } from "../../src/models/hub-listing.ts";

// RFC 8288 §3.2 / RFC 3986 §5.1.3: a relative link's context is the URL the answer came from,
// which after a redirect (a renamed repo's old name answers 307 to the new one) is not the URL
// asked. Resolved against the asked URL, page 2 was read from the old path: a 404, or another
// repo's page taken for this one's files.
const HUB = "https://hub.example";
const COMMIT = "a".repeat(40);

function file(path: string) {
  return { type: "file", path, size: 1, oid: "b".repeat(40) };
}

/** A hub where `old/m` moved to `new/m`: its listing redirects, and pages on with a relative link. */
function movedRepoFetch(treeOf: (repo: string) => string) {
  const asked: string[] = [];
  const fake = (async (input: string | URL | Request) => {
    const url = String(input);
    asked.push(url);
    if (url === treeOf("old/m"))
      return new Response(null, { status: 307, headers: { location: treeOf("new/m") } });
    if (url === treeOf("new/m"))
      return Response.json([file("a.gguf")], { headers: { link: '<?recursive=true&cursor=2>; rel="next"' } });
    if (url === `${treeOf("new/m").split("?")[0]}?recursive=true&cursor=2`)
      return Response.json([file("b.gguf")]);
    return new Response("not here", { status: 404 });
  }) as typeof fetch;
  return { fake, asked };
}

describe("a relative next page after a redirect", () => {
  test("the pull's listing reads it from the URL that answered", async () => {
    const treeOf = (repo: string) => `${HUB}/api/models/${repo}/tree/${COMMIT}?recursive=true`;
    const { fake } = movedRepoFetch(treeOf);
    const files = await new HubClient({ endpoint: HUB, fetch: fake }).listFiles("old/m", COMMIT);
    expect(files.map((f) => f.path)).toEqual(["a.gguf", "b.gguf"]);
  });

  test("the remote fit check's listing reads it from the URL that answered", async () => {
    const treeOf = (repo: string) => `${HUB}/api/models/${repo}/tree/main?recursive=true`;
    const { fake, asked } = movedRepoFetch(treeOf);
    const access = { endpoint: HUB, token: null, fetch: fake, offline: false, timeoutMs: 10_000 };
    const files = await listRepoFiles(access, "old/m", "main");
    expect(files.map((f) => f.path)).toEqual(["a.gguf", "b.gguf"]);
    expect(asked.at(-1)).toBe(`${HUB}/api/models/new/m/tree/main?recursive=true&cursor=2`);
  });
});
