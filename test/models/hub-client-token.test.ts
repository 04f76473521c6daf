import { describe, expect, test } from "bun:test";
import { HubBadAnswer, HubClient, HubError } from "../../src/models/hub-client.ts";
import { hubFetch, listRepoFiles } from "../../src/models/hub-listing.ts";
import { TOO_LARGE_ENTRY } from "../../src/models/hub-listing-page.ts";
import { fromHub } from "../../src/models/pull-errors.ts";
import type { CoreError } from "../../src/protocol/errors.ts";
import { turnsDuring } from "../fixtures/loop-lag.ts";

// The token goes to the hub's own origin only (src/models/hub-client.ts): not to a listing page
// the hub's `Link` header puts on another host, nor over plain http after a redirect that keeps
// the host but drops TLS, where anyone on the path reads it.
const HUB = "https://hub.example";
const COMMIT = "a".repeat(40);

/** A fetch answering from `answers` by URL, recording each request's authorization header. */
function recordingFetch(answers: Record<string, () => Response>) {
  const seen: { url: string; authorization: string | null }[] = [];
  const fake = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = String(input);
    seen.push({ url, authorization: new Headers(init?.headers).get("authorization") });
    const answer = answers[url];
    return answer ? answer() : new Response("not here", { status: 404 });
  }) as typeof fetch;
  return { fake, seen };
}

describe("the hub token's destinations", () => {
  test("a listing's next page on another host is asked without the token", async () => {
    const first = `${HUB}/api/models/org/m/tree/${COMMIT}?recursive=true`;
    const next = "https://elsewhere.example/page2";
    const { fake, seen } = recordingFetch({
      [first]: () => Response.json([], { headers: { link: `<${next}>; rel="next"` } }),
      [next]: () => Response.json([]),
    });
    await new HubClient({ endpoint: HUB, token: "hf_secret", fetch: fake }).listFiles("org/m", COMMIT);
    expect(seen).toEqual([
      { url: first, authorization: "Bearer hf_secret" },
      { url: next, authorization: null },
    ]);
  });

  test("a redirect to the hub's host over plain http is followed without the token", async () => {
    const resolve = `${HUB}/org/m/resolve/${COMMIT}/m.gguf`;
    const plain = "http://hub.example/org/m/resolve/m.gguf";
    const { fake, seen } = recordingFetch({
      [resolve]: () => new Response(null, { status: 302, headers: { location: plain } }),
      [plain]: () => new Response("bytes"),
    });
    const opened = await new HubClient({ endpoint: HUB, token: "hf_secret", fetch: fake }).open(
      "org/m",
      COMMIT,
      "m.gguf",
      0,
    );
    await opened.response.body?.cancel();
    expect(seen).toEqual([
      { url: resolve, authorization: "Bearer hf_secret" },
      { url: plain, authorization: null },
    ]);
  });

  test("an API call the hub redirects (a renamed repo) is followed, the token kept on the hub only", async () => {
    // The hub answers a renamed repo's old name with a relative 307 to the new one, as
    // huggingface_hub follows; pull took the 307 itself as the hub's failure ("HTTP 307").
    const old = `${HUB}/api/models/org/old/revision/main`;
    const moved = `${HUB}/api/models/org/new/revision/main`;
    const tree = `${HUB}/api/models/org/old/tree/${COMMIT}?recursive=true`;
    const elsewhere = "https://mirror.example/tree";
    const { fake, seen } = recordingFetch({
      [old]: () =>
        new Response(null, { status: 307, headers: { location: "/api/models/org/new/revision/main" } }),
      [moved]: () => Response.json({ sha: COMMIT }),
      [tree]: () => new Response(null, { status: 302, headers: { location: elsewhere } }),
      [elsewhere]: () => Response.json([{ type: "file", path: "m.gguf", size: 1, oid: "b".repeat(40) }]),
    });
    const hub = new HubClient({ endpoint: HUB, token: "hf_secret", fetch: fake });
    expect(await hub.commitOf("org/old", "main")).toBe(COMMIT);
    expect((await hub.listFiles("org/old", COMMIT)).map((f) => f.path)).toEqual(["m.gguf"]);
    expect(seen).toEqual([
      { url: old, authorization: "Bearer hf_secret" },
      { url: moved, authorization: "Bearer hf_secret" },
      { url: tree, authorization: "Bearer hf_secret" },
      { url: elsewhere, authorization: null },
    ]);
  });
});

describe("a redirect to a malformed URL", () => {
  test("is the hub's bad answer, not a TypeError the pull turns into internal_error", async () => {
    const old = `${HUB}/api/models/org/old/revision/main`;
    const file = `${HUB}/org/old/resolve/${COMMIT}/m.gguf`;
    const bad = () => new Response(null, { status: 307, headers: { location: "http://[" } });
    const { fake } = recordingFetch({ [old]: bad, [file]: bad });
    const hub = new HubClient({ endpoint: HUB, fetch: fake });
    await expect(hub.commitOf("org/old", "main")).rejects.toBeInstanceOf(HubBadAnswer);
    await expect(hub.open("org/old", COMMIT, "m.gguf", 0)).rejects.toBeInstanceOf(HubBadAnswer);
  });

  test("a listing's next page that is no URL is the hub's bad answer too, not a TypeError", async () => {
    // `Link: <http://[>; rel="next"`: new URL threw, and the pull answered internal_error "Invalid URL".
    const first = `${HUB}/api/models/org/m/tree/${COMMIT}?recursive=true`;
    const { fake } = recordingFetch({
      [first]: () => Response.json([], { headers: { link: '<http://[>; rel="next"' } }),
    });
    const hub = new HubClient({ endpoint: HUB, fetch: fake });
    const err = await hub.listFiles("org/m", COMMIT).catch((e: Error) => e);
    expect(err).toBeInstanceOf(HubBadAnswer);
    expect((fromHub(err, { repo: "org/m" }) as CoreError).data).toMatchObject({ cause: "hub_error" });
  });

  test("the remote fit's read says the hub redirected badly (model_missing hub_error), not an internal error", async () => {
    const url = `${HUB}/org/m/resolve/main/m.gguf`;
    const { fake } = recordingFetch({
      [url]: () => new Response(null, { status: 302, headers: { location: "http://[" } }),
    });
    const access = { endpoint: HUB, token: null, fetch: fake, offline: false, timeoutMs: 10_000 };
    await expect(hubFetch(access, url, { repo: "org/m", file: "m.gguf" })).rejects.toMatchObject({
      code: "model_missing",
      data: { problem: "hub_error" },
    });
  });
});

describe("the hub's status line", () => {
  // A status line's reason is the hub's (or a proxy's) text: 60,000 characters of it went into
  // the host's error whole, as llama-server's did before 19111dc5.
  test("the hub's reason phrase is cut in the error, as llama-server's is", async () => {
    const url = `${HUB}/org/m/resolve/main/m.gguf`;
    const { fake } = recordingFetch({
      [url]: () => new Response(null, { status: 500, statusText: "r".repeat(60_000) }),
    });
    const access = { endpoint: HUB, token: null, fetch: fake, offline: false, timeoutMs: 10_000 };
    const err = await hubFetch(access, url, { repo: "org/m", file: "m.gguf" }).catch((e: Error) => e);
    expect(err).toMatchObject({ code: "model_missing", data: { problem: "hub_error", status: 500 } });
    expect((err as Error).message).toContain("rrrr");
    expect((err as Error).message.length).toBeLessThan(500);
  });
});

describe("the hub's own words", () => {
  // A mirror or proxy at HF_ENDPOINT that refuses the token may quote it back ("invalid token
  // hf_…"): the pull's error carries the hub's message to the host, its log and bug reports.
  const TOKEN = "hf_Zq81secretTokenValue";
  test.each([
    [
      "x-error-message",
      () => new Response(null, { status: 401, headers: { "x-error-message": `bad token ${TOKEN}` } }),
    ],
    ["a JSON body", () => Response.json({ error: `Bearer ${TOKEN} is not a valid token` }, { status: 401 })],
    // Cut at 300 characters, the token's end past the cut: what is left of it is still its own.
    ["a long body", () => Response.json({ error: `${"x".repeat(290)} ${TOKEN}` }, { status: 401 })],
  ])("a refusal quoting the token in %s does not show it", async (_, answer) => {
    const url = `${HUB}/api/models/org/m/revision/main`;
    const { fake } = recordingFetch({ [url]: answer });
    const hub = new HubClient({ endpoint: HUB, token: TOKEN, fetch: fake });
    const err = await hub.commitOf("org/m", "main").catch((e: Error) => e);
    expect(err).toBeInstanceOf(HubError);
    const shown = JSON.stringify({ message: (err as Error).message, said: (err as HubError).serverMessage });
    expect(shown).toContain("401");
    expect(shown).not.toContain(TOKEN.slice(0, 8));
  });

  test("an error code quoting the token (X-Error-Code) shows neither it nor more than a code's length", async () => {
    // The code goes into the pull's data (`hub_code`) and the error's message as the hub sent it.
    const url = `${HUB}/api/models/org/m/revision/main`;
    const { fake } = recordingFetch({
      [url]: () =>
        new Response(null, {
          status: 401,
          headers: { "x-error-code": `BadToken:${TOKEN}${"x".repeat(5000)}` },
        }),
    });
    const hub = new HubClient({ endpoint: HUB, token: TOKEN, fetch: fake });
    const err = (await hub.commitOf("org/m", "main").catch((e: Error) => e)) as HubError;
    expect(err).toBeInstanceOf(HubError);
    const pulled = fromHub(err, { repo: "org/m" }) as CoreError;
    const shown = JSON.stringify([err.message, err.hubCode, pulled.message, pulled.data]);
    expect(shown).toContain("BadToken");
    expect(shown).not.toContain(TOKEN.slice(0, 8));
    expect(err.hubCode!.length).toBeLessThanOrEqual(100);
  });

  test("the reason phrase of a remote fit's failed read does not show it either", async () => {
    const url = `${HUB}/org/m/resolve/main/m.gguf`;
    const { fake } = recordingFetch({
      [url]: () => new Response(null, { status: 500, statusText: `proxy refused ${TOKEN}` }),
    });
    const access = { endpoint: HUB, token: TOKEN, fetch: fake, offline: false, timeoutMs: 10_000 };
    const err = await hubFetch(access, url, { repo: "org/m", file: "m.gguf" }).catch((e: Error) => e);
    expect(err).toMatchObject({ code: "model_missing", data: { problem: "hub_error", status: 500 } });
    expect((err as Error).message).toContain("proxy refused");
    expect((err as Error).message).not.toContain(TOKEN.slice(0, 8));
  });

  test("a remote fit's listing that is not JSON is not quoted: JSON.parse's error names the token it met", async () => {
    // A mirror echoing the request's credentials in a 200 page: JSC's parse error quotes the
    // first identifier it cannot read (`Unexpected identifier "hf_…"`), and that message was the
    // model_missing error's.
    const url = `${HUB}/api/models/org/m/tree/main?recursive=true`;
    const { fake } = recordingFetch({ [url]: () => new Response(`${TOKEN} accepted`, { status: 200 }) });
    const access = { endpoint: HUB, token: TOKEN, fetch: fake, offline: false, timeoutMs: 10_000 };
    const err = await listRepoFiles(access, "org/m", "main").catch((e: Error) => e);
    expect(err).toMatchObject({ code: "model_missing", data: { problem: "hub_error" } });
    expect((err as Error).message).toContain("not JSON");
    expect((err as Error).message).not.toContain(TOKEN.slice(0, 8));
  });
});

test("the hub's words cut at 300 characters never split an emoji: the error is well-formed text", async () => {
  // The cut was by UTF-16 units: an emoji across it left a lone surrogate in the pull's error,
  // which a host's strict JSON reader (serde_json) refuses as the whole line (docs/protocol.md "Text").
  const url = `${HUB}/api/models/org/m/revision/main`;
  const { fake } = recordingFetch({
    [url]: () => Response.json({ error: `${"x".repeat(299)}\u{1F600} and more` }, { status: 500 }),
  });
  const err = (await new HubClient({ endpoint: HUB, fetch: fake })
    .commitOf("org/m", "main")
    .catch((e) => e)) as HubError;
  expect(err).toBeInstanceOf(HubError);
  expect(err.serverMessage).toBe("x".repeat(299));
  expect(err.message.isWellFormed()).toBe(true);
});

describe("a listing of many files", () => {
  test("is checked in slices, so ping and cancel are answered meanwhile", async () => {
    // A repo of 100,000 files (or a hostile mirror's 64 MiB page): each entry is checked before
    // a path is made of it, about a second of checks in one turn of the loop.
    const url = `${HUB}/api/models/org/m/tree/${COMMIT}?recursive=true`;
    const page = Array.from({ length: 60_000 }, (_, i) => ({
      type: "file",
      oid: "b".repeat(40),
      size: 1,
      // Every entry checked, the GGUFs alone kept (the only files a pull takes).
      path: `f/${i}.${i % 10 ? "txt" : "gguf"}`,
    }));
    const { fake } = recordingFetch({ [url]: () => Response.json(page) });
    const hub = new HubClient({ endpoint: HUB, fetch: fake });
    const { value: files, turns } = await turnsDuring(() => hub.listFiles("org/m", COMMIT));
    expect(files).toHaveLength(6_000);
    // A turn of the loop at least between each two slices of 5,000 entries.
    expect(turns).toBeGreaterThanOrEqual(11);
  });

  test("read by the remote fit check is checked in slices too", async () => {
    const url = `${HUB}/api/models/org/m/tree/main?recursive=true`;
    const page = Array.from({ length: 60_000 }, (_, i) => ({
      type: "file",
      size: 1,
      path: `f/${i}.${i % 10 ? "txt" : "gguf"}`,
    }));
    const { fake } = recordingFetch({ [url]: () => Response.json(page) });
    const access = { endpoint: HUB, token: null, fetch: fake, offline: false, timeoutMs: 10_000 };
    const { value: files, turns } = await turnsDuring(() => listRepoFiles(access, "org/m", "main"));
    expect(files).toHaveLength(6_000);
    expect(turns).toBeGreaterThanOrEqual(11);
  });

  test("a page of few but large entries is parsed in pieces, the loop given back between", async () => {
    // A hostile mirror's page: 16 entries of 256 KiB each (extra fields are let through) were
    // one JSON.parse, ~0.3 s for a 64 MiB page, with no turn of the loop for ping or cancel.
    const url = `${HUB}/api/models/org/m/tree/main?recursive=true`;
    const pad = "x".repeat(256 * 1024);
    const page = Array.from({ length: 16 }, (_, i) => ({
      type: "file",
      oid: "b".repeat(40),
      size: 1,
      path: `f/${i}.gguf`,
      pad,
    }));
    const { fake } = recordingFetch({ [url]: () => Response.json(page) });
    const access = { endpoint: HUB, token: null, fetch: fake, offline: false, timeoutMs: 10_000 };
    const read = await turnsDuring(() => listRepoFiles(access, "org/m", "main"));
    expect(read.value).toHaveLength(16);
    const listed = await turnsDuring(() =>
      new HubClient({ endpoint: HUB, fetch: fake }).listFiles("org/m", "main"),
    );
    expect(listed.value).toHaveLength(16);
    // The read of the body alone takes a turn or two; a turn at least a piece of 256 KiB.
    expect(Math.min(read.turns, listed.turns)).toBeGreaterThanOrEqual(15);
  });
});

describe("a page of one huge entry", () => {
  test("is refused by both readers as having too large an entry, not parsed in one turn", async () => {
    // One 2 MiB entry was one piece of the sliced parse (util/sliced-json-array.ts), cut and
    // parsed in one turn: a 64 MiB one held the loop ~2 s.
    const url = `${HUB}/api/models/org/m/tree/main?recursive=true`;
    const entry = { type: "file", oid: "b".repeat(40), size: 1, path: "f.txt", pad: Array(1 << 20).fill(0) };
    const { fake } = recordingFetch({ [url]: () => Response.json([entry]) });
    const access = { endpoint: HUB, token: null, fetch: fake, offline: false, timeoutMs: 10_000 };
    const remote = await listRepoFiles(access, "org/m", "main").catch((e: Error) => e);
    expect((remote as Error).message).toContain(TOO_LARGE_ENTRY);
    const pull = await new HubClient({ endpoint: HUB, fetch: fake })
      .listFiles("org/m", "main")
      .catch((e) => e);
    expect(pull).toBeInstanceOf(HubBadAnswer);
    expect((pull as Error).message).toContain(TOO_LARGE_ENTRY);
  });
});

describe("a hostile revision answer", () => {
  // JSON that is not an object (`null`, a number): reading its `sha` threw a TypeError, which
  // reached the pull as internal_error, not the hub's bad answer.
  test("JSON null or a bare value is the hub's bad answer", async () => {
    for (const body of ["null", "7", '"x"', "[]"]) {
      const url = `${HUB}/api/models/org/m/revision/main`;
      const { fake } = recordingFetch({ [url]: () => new Response(body) });
      const err = await new HubClient({ endpoint: HUB, fetch: fake })
        .commitOf("org/m", "main")
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(HubBadAnswer);
      expect((err as Error).message).toBe("the hub's answer for the revision has no commit sha");
    }
  });
});
