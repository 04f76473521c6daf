import { afterEach, describe, expect, test } from "bun:test";
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { defaultConfig, loadConfig } from "../../src/config/load.ts";
import { fitVerdict } from "../../src/models/fit-verdict.ts";
import { nextLink } from "../../src/models/hub-client.ts";
import { readRemoteModel } from "../../src/models/hub-header.ts";
import { hubAccess, listRepoFiles, parseTreeListing } from "../../src/models/hub-listing.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { planReportWithHub } from "../../src/models/plan-with-hub.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { type ModelRef, parseModelRef } from "../../src/protocol/model-ref.ts";
import { llama7b, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { type RangeServer, type RangeServerOptions, startRangeServer } from "../fixtures/range-server.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { tinyModel, tinySplit } from "./cache-layout.ts";

const probe = async () => cpuOnlyMachine();
const config = defaultConfig("/").config;
const TOKEN = "hf_secret_token_123";

let servers: RangeServer[] = [];
afterEach(() => {
  for (const s of servers) s.stop();
  servers = [];
});

/** A hub stand-in serving `files` (written as GGUFs into `dir`) for org/m, with the given knobs. */
function hubWith(
  dir: string,
  files: Record<string, Parameters<typeof writeGguf>[2] | string>,
  options: Omit<RangeServerOptions, "repos"> & { token?: string } = {},
): RangeServer {
  const served: Record<string, string> = {};
  for (const [name, spec] of Object.entries(files)) {
    const local = join(dir, name.replaceAll("/", "_"));
    if (typeof spec === "string") writeFileSync(local, spec);
    else writeGguf(dir, name.replaceAll("/", "_"), spec);
    served[name] = local;
  }
  const server = startRangeServer({
    ...options,
    repos: { "org/m": { files: served, token: options.token } },
  });
  servers.push(server);
  return server;
}

/** A fetch that asks for `range(start, end)` where the bytes start-end were asked: a server answering another range. */
function askingInstead(range: (start: number, end: number) => string): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    const asked = /^bytes=(\d+)-(\d+)$/.exec(headers.get("range") ?? "");
    if (asked) headers.set("range", range(Number(asked[1]), Number(asked[2])));
    return fetch(input, { ...init, headers });
  }) as typeof fetch;
}

/** A model whose header (a 3 MB description) outgrows the first 2 MB read: a second range, from an offset. */
function longHeader() {
  const spec = tinyModel();
  spec.metadata["general.description"] = { type: "str", value: "x".repeat(3_000_000) };
  return spec;
}

/**
 * A model on the hub judged before any download: its header read as `plan` reads one not yet
 * pulled (hub-plan-deps.ts), the verdict the one `pull` and `models` give (fit-verdict.ts).
 */
async function judged(
  ref: ModelRef,
  planConfig: typeof config,
  env: Record<string, string>,
  deps: { home: string; fetch?: typeof fetch },
) {
  const remote = await readRemoteModel(ref, hubAccess(env, deps.home, deps.fetch));
  return { ...remote, fit: fitVerdict(remote.model, await probe(), planConfig) };
}

async function failure(p: Promise<unknown>): Promise<CoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err instanceof CoreError) return err;
  throw new Error(`expected a CoreError, got ${String(err)}`);
}

describe("the hub's file listing", () => {
  test("files with their LFS size and sha256; folders dropped; anything else refused", () => {
    expect(
      parseTreeListing([
        { type: "directory", path: "sub", oid: "x", size: 0 },
        { type: "file", path: "README.md", oid: "y", size: 12 },
        { type: "file", path: "sub/m.gguf", oid: "z", size: 134, lfs: { oid: "ab".repeat(32), size: 5e9 } },
      ]),
    ).toEqual([
      { path: "README.md", size: 12, sha256: null },
      { path: "sub/m.gguf", size: 5e9, sha256: "ab".repeat(32) },
    ]);
    expect(() => parseTreeListing({ error: "nope" })).toThrow("not a list of files");
    expect(nextLink('<https://h/api?cursor=2>; rel="next"', "https://h/api")).toBe("https://h/api?cursor=2");
    // A relative link is resolved against the page that gave it (it threw a TypeError before).
    expect(nextLink('</api?cursor=3>; rel="next"', "https://h/api?cursor=2")).toBe("https://h/api?cursor=3");
    expect(nextLink(null, "https://h/api")).toBeNull();
  });

  test("a Link header is read as RFC 8288 says: a comma inside the URL or a quoted parameter splits nothing", () => {
    // A cursor with a comma in it (the URL's own `,`, legal unescaped in a query) was cut at the
    // comma and the next page asked with half its cursor.
    expect(nextLink('<https://h/api?cursor=a,b>; rel="next"', "https://h/api")).toBe(
      "https://h/api?cursor=a,b",
    );
    expect(nextLink('<https://h/p1>; rel="prev", <https://h/api?c=x,y>; rel="next"', "https://h/api")).toBe(
      "https://h/api?c=x,y",
    );
    // A quoted title holding `, <…>; rel="next"` is text, not a second link.
    expect(
      nextLink('<https://h/a>; title="x, <https://evil/>; rel=next"; rel="prev"', "https://h/api"),
    ).toBeNull();
    // rel is a space-separated list, compared without case; "nextpage" is not "next".
    expect(nextLink('<https://h/b>; rel="prev NEXT"', "https://h/api")).toBe("https://h/b");
    expect(nextLink('<https://h/c>; rel="nextpage"', "https://h/api")).toBeNull();
    expect(nextLink("<https://h/d>; rel=next", "https://h/api")).toBe("https://h/d");
    expect(nextLink("garbage, <https://h/e>; rel=next", "https://h/api")).toBe("https://h/e");
  });

  test("an entry that would leave the repo, or an LFS oid that is not a sha256, is refused naming it (issue 19 item 5)", async () => {
    const file = (path: string, lfsOid = "ab".repeat(32)) => ({
      type: "file",
      path,
      oid: "y",
      size: 1,
      lfs: { oid: lfsOid, size: 1 },
    });
    expect(() => parseTreeListing([file("../../m.gguf")])).toThrow(
      `the hub's file listing names "../../m.gguf", which has a '..' segment: a listed path must stay inside the repo`,
    );
    expect(() => parseTreeListing([file("a\\m.gguf")])).toThrow("has a backslash");
    expect(() => parseTreeListing([file("m.gguf", "../../x")])).toThrow(
      `names "m.gguf" with lfs.oid "../../x", which is not a sha256`,
    );
    // A hostile hub stand-in: the remote fit check makes no range request for it.
    const { startHubStandIn } = await import("../fixtures/hub-stand-in.ts");
    const hub = await startHubStandIn([
      {
        id: "org/evil",
        files: [{ path: "m-Q4_K_M.gguf", content: new Uint8Array(8) }],
        listing: (entries) => entries.map((e) => ({ ...e, path: `../${e.path}` })),
      },
    ]);
    try {
      const err = await failure(
        judged(parseModelRef("org/evil:Q4_K_M"), config, { HF_ENDPOINT: hub.url }, { home: "/" }),
      );
      expect(err.code).toBe("model_missing");
      expect(err.data).toMatchObject({ problem: "hub_error", repo: "org/evil" });
      expect(err.message).toContain(`org/evil: the hub's file listing names "../m-Q4_K_M.gguf"`);
      expect(hub.requests.filter((r) => r.path.includes("/resolve/"))).toEqual([]);
    } finally {
      await hub.close();
    }
  });

  test("pages linked by Link: rel=next are all read", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "a.gguf": "x", "b.gguf": "y", "c.gguf": "z" }, { pageSize: 2 });
    const files = await listRepoFiles(hubAccess({ HF_ENDPOINT: hub.url }, dir.path), "org/m", "main");
    expect(files.map((f) => f.path)).toEqual(["a.gguf", "b.gguf", "c.gguf"]);
    expect(hub.requests.filter((r) => r.path.includes("/tree/"))).toHaveLength(2);
  });
});

describe("will it fit, from the hub's header alone", () => {
  test("a model that fits: its file, quantization, size and sha256, read by range requests only", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, {
      "m-Q4_K_M.gguf": tinyModel(),
      "m-F16.gguf": tinyModel(1),
      "README.md": "hi",
    });
    const fit = await judged(
      parseModelRef("org/m:q4_k_m"),
      config,
      { HF_ENDPOINT: hub.url },
      { home: dir.path },
    );
    expect(fit).toMatchObject({
      repo: "org/m",
      file: "m-Q4_K_M.gguf",
      files: ["m-Q4_K_M.gguf"],
      quantization: "Q4_K_M",
      sha256: "f".repeat(64),
      model: { architecture: "llama" },
    });
    expect(fit.fit).toMatchObject({ fits: true, device: "cpu" });
    expect(fit.fit.message).toStartWith("fits: ");
    const reads = hub.requests.filter((r) => r.path.includes("/resolve/"));
    expect(reads.length).toBeGreaterThan(0);
    for (const r of reads) expect(r.range).toMatch(/^bytes=\d+-\d+$/);
  });

  test("a 3.8 GB model on a machine with 1 GB: does not fit, judged from a few MB", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "big-Q4_K_M.gguf": llama7b() });
    const small = { ...config, hardware: { ram_bytes: 2 ** 30, vram_bytes: null } };
    const fit = await judged(
      parseModelRef("org/m:Q4_K_M"),
      small,
      { HF_ENDPOINT: hub.url },
      { home: dir.path },
    );
    expect(fit.size_bytes).toBeGreaterThan(3e9);
    expect(fit.fit).toMatchObject({ fits: false, device: "RAM" });
    expect(fit.fit.needed_bytes!).toBeGreaterThan(fit.fit.available_bytes!);
    expect(fit.fit.message).toContain("does not fit");
  });

  test("a server that ignores Range is read only as far as the header, then cut off", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "big-Q4_K_M.gguf": llama7b() }, { ignoreRange: true });
    const before = process.memoryUsage().rss;
    const fit = await judged(
      parseModelRef("org/m:Q4_K_M"),
      config,
      { HF_ENDPOINT: hub.url },
      { home: dir.path },
    );
    expect(fit.model.architecture).toBe("llama");
    expect(process.memoryUsage().rss - before).toBeLessThan(256 * 2 ** 20);
  });

  test("a split model: every part's header, sizes summed, the first part named", async () => {
    using dir = tmpdir();
    const [first, second] = tinySplit(7);
    const hub = hubWith(dir.path, {
      "m-Q8_0-00001-of-00002.gguf": first,
      "m-Q8_0-00002-of-00002.gguf": second,
    });
    const fit = await judged(
      parseModelRef("org/m:Q8_0"),
      config,
      { HF_ENDPOINT: hub.url },
      { home: dir.path },
    );
    expect(fit.file).toBe("m-Q8_0-00001-of-00002.gguf");
    expect(fit.files).toHaveLength(2);
    const served = hub.requests.filter((r) => r.path.includes("/resolve/")).map((r) => r.path);
    expect(served.some((p) => p.includes("00002-of-00002"))).toBe(true);
  });

  test("a split whose parts are not one model's is not_gguf before any download, as llama.cpp refuses it", async () => {
    using dir = tmpdir();
    const part = (no: number) => {
      const spec = tinyModel(7);
      return { ...spec, metadata: { ...spec.metadata, "split.no": { type: "u16" as const, value: no } } };
    };
    // The second part is a copy of the first (split.no 0): another split's part.
    const hub = hubWith(dir.path, {
      "m-Q8_0-00001-of-00002.gguf": part(0),
      "m-Q8_0-00002-of-00002.gguf": part(0),
    });
    const env = { HF_ENDPOINT: hub.url };
    const err = await failure(judged(parseModelRef("org/m:Q8_0"), config, env, { home: dir.path }));
    expect(err.data).toMatchObject({ problem: "not_gguf", file: "m-Q8_0-00001-of-00002.gguf" });
    expect(err.message).toContain("part 2 of 2: its split.no says it is part 1");
  });

  test("a gated repo: 401 without a token; the token from HF_TOKEN or the token file, never sent to the CDN", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() }, { token: TOKEN, redirect: true });
    const ref = parseModelRef("org/m:Q4_K_M");
    const denied = await failure(judged(ref, config, { HF_ENDPOINT: hub.url }, { home: dir.path }));
    expect(denied.code).toBe("model_missing");
    expect(denied.data).toMatchObject({ problem: "hub_unauthorized", status: 401, repo: "org/m" });
    expect(denied.message).toContain("HF_TOKEN");

    const fit = await judged(ref, config, { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN }, { home: dir.path });
    expect(fit.fit.fits).toBe(true);
    mkdirSync(join(dir.path, ".cache/huggingface"), { recursive: true });
    writeFileSync(join(dir.path, ".cache/huggingface/token"), `${TOKEN}\n`);
    await judged(ref, config, { HF_ENDPOINT: hub.url }, { home: dir.path });

    const toHub = hub.requests.filter((r) => r.server === "hub" && r.authorization);
    expect(toHub.length).toBeGreaterThan(0);
    for (const r of toHub) expect(r.authorization).toBe(`Bearer ${TOKEN}`);
    const toCdn = hub.requests.filter((r) => r.server === "cdn");
    expect(toCdn.length).toBeGreaterThan(0);
    for (const r of toCdn) expect(r.authorization).toBeNull();
    for (const r of hub.requests) expect(r.path).not.toContain(TOKEN);

    // A wrong token: refused, and the error does not echo it.
    const wrong = await failure(
      judged(ref, config, { HF_ENDPOINT: hub.url, HF_TOKEN: "hf_wrong_one" }, { home: dir.path }),
    );
    expect(wrong.message).toContain("the token has no access");
    expect(JSON.stringify({ m: wrong.message, d: wrong.data })).not.toContain("hf_wrong_one");
  });

  test("a token with a control character is hub_unauthorized saying so, before any request, never shown (issue 19 item 9)", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() });
    const env = { HF_ENDPOINT: hub.url, HF_TOKEN: "hf_secret\u0001value" };
    const err = await failure(judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path }));
    expect(err.code).toBe("model_missing");
    expect(err.data).toMatchObject({ problem: "hub_unauthorized" });
    expect(err.message).toBe(
      "the hub token cannot be used: HF_TOKEN holds a control character (a token is printable ASCII, such as hf_…); correct it or unset it",
    );
    expect(JSON.stringify({ m: err.message, d: err.data })).not.toContain("secret");
    expect(hub.requests).toEqual([]);
  });

  test("unknown repo, a quant the repo lacks, an ambiguous quant: each says so", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "a/m-Q4_K_M.gguf": tinyModel(), "b/m-Q4_K_M.gguf": tinyModel() });
    const env = { HF_ENDPOINT: hub.url };
    const unknown = await failure(judged(parseModelRef("org/other:Q4_K_M"), config, env, { home: dir.path }));
    expect(unknown.data).toMatchObject({ problem: "hub_not_found", status: 404 });
    expect(unknown.message).toContain("org/other");
    const lacks = await failure(judged(parseModelRef("org/m:Q2_K"), config, env, { home: dir.path }));
    expect(lacks.data).toMatchObject({
      problem: "hub_not_found",
      available: ["a/m-Q4_K_M.gguf", "b/m-Q4_K_M.gguf"],
    });
    const many = await failure(judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path }));
    expect(many.data).toMatchObject({
      problem: "ambiguous",
      matches: ["a/m-Q4_K_M.gguf", "b/m-Q4_K_M.gguf"],
    });
    const file = await failure(judged(parseModelRef("org/m:absent.gguf"), config, env, { home: dir.path }));
    expect(file.data?.problem).toBe("hub_not_found");
  });

  test("a repo of thousands of GGUFs: the names listed are capped, with their count", async () => {
    using dir = tmpdir();
    // Every name went into the message and data.available (or data.matches): a multi-MB error line.
    const tree = (quant: (i: number) => string) =>
      (async () =>
        new Response(
          JSON.stringify(
            Array.from({ length: 5000 }, (_, i) => ({
              type: "file",
              path: `m${i}-${quant(i)}.gguf`,
              size: 1,
            })),
          ),
        )) as unknown as typeof fetch;
    const env = { HF_ENDPOINT: "https://hub.example" };
    const lacks = await failure(
      judged(parseModelRef("org/m:Q2_K"), config, env, { home: dir.path, fetch: tree(() => "Q4_K_M") }),
    );
    expect(lacks.data).toMatchObject({ problem: "hub_not_found", available_count: 5000 });
    expect(lacks.data?.available).toHaveLength(100);
    expect(lacks.message).toContain("(5000 in all)");
    expect(JSON.stringify({ m: lacks.message, d: lacks.data }).length).toBeLessThan(10_000);
    const many = await failure(
      judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path, fetch: tree(() => "Q4_K_M") }),
    );
    expect(many.data).toMatchObject({ problem: "ambiguous", matches_count: 5000 });
    expect(many.data?.matches).toHaveLength(100);
    expect(JSON.stringify({ m: many.message, d: many.data }).length).toBeLessThan(10_000);
  });

  test("a file that is not a GGUF, and one whose header is cut short", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, {
      "fake-Q4_K_M.gguf": "<html>this is not a model</html>",
      "cut-Q8_0.gguf": "GGUF\u0003\u0000\u0000\u0000",
    });
    const env = { HF_ENDPOINT: hub.url };
    const fake = await failure(judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path }));
    expect(fake.data).toMatchObject({ problem: "not_gguf", file: "fake-Q4_K_M.gguf" });
    const cut = await failure(judged(parseModelRef("org/m:Q8_0"), config, env, { home: dir.path }));
    expect(cut.data?.problem).toBe("truncated");
  });

  test("a web page in the file's place (a filtering proxy, a sign-in page) is hub_error, not a file that is no GGUF", async () => {
    // A proxy that lets the hub's API through but blocks downloads answers the file with its
    // page (200, text/html): read as the file's bytes, it was "not a GGUF", the model blamed.
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() });
    const proxy = (async (input: string | URL | Request, init?: RequestInit) => {
      if (!String(input).includes("/resolve/")) return fetch(input, init);
      const page = "<!doctype html><html><body>Downloads are blocked by policy</body></html>";
      return new Response(page, { status: 200, headers: { "content-type": "text/html; charset=utf-8" } });
    }) as typeof fetch;
    const env = { HF_ENDPOINT: hub.url };
    const err = await failure(
      judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path, fetch: proxy }),
    );
    expect(err.data).toMatchObject({ problem: "hub_error", file: "m-Q4_K_M.gguf" });
    expect(err.message).toContain("text/html");
  });

  test("a 206 of other bytes than asked (its Content-Range) is hub_error, not read as the header's", async () => {
    // A server may answer a range other than the one asked; read from the asked offset, its
    // bytes were the header's: "not a GGUF" blamed the model, or later bytes misread as tensors.
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() });
    const shifted = (async (input: string | URL | Request, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      const asked = /^bytes=(\d+)-(\d+)$/.exec(headers.get("range") ?? "");
      if (asked) headers.set("range", `bytes=${Number(asked[1]) + 16}-${asked[2]}`);
      return fetch(input, { ...init, headers });
    }) as typeof fetch;
    const env = { HF_ENDPOINT: hub.url };
    const err = await failure(
      judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path, fetch: shifted }),
    );
    expect(err.data).toMatchObject({ problem: "hub_error", file: "m-Q4_K_M.gguf" });
    expect(err.message).toContain("asked for bytes from 0, the server sent bytes 16-");
  });

  test("a 206 that starts before the bytes asked is read from where they begin", async () => {
    // A header past the first read (a 3 MB description) takes a second range, from an offset:
    // a server answering it from earlier sends bytes that precede the asked ones.
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": longHeader() });
    const earlier = askingInstead((start, end) => `bytes=${Math.max(0, start - 16)}-${end}`);
    const env = { HF_ENDPOINT: hub.url };
    const plain = await judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path });
    const shifted = await judged(parseModelRef("org/m:Q4_K_M"), config, env, {
      home: dir.path,
      fetch: earlier,
    });
    const asked = hub.requests.filter((r) => r.path.includes("/resolve/")).map((r) => r.range);
    expect(asked.some((r) => r !== null && !r.startsWith("bytes=0-"))).toBe(true);
    expect(shifted.model).toEqual(plain.model);
  });

  test("a 206 of bytes that all lie before the ones asked is hub_error, not read as the header's end", async () => {
    // Skipped to where the asked bytes would begin, the body held none of them: the header read
    // as cut short, "not a GGUF", the model blamed for the server's answer.
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": longHeader() });
    const stale = askingInstead((start, end) => (start === 0 ? `bytes=0-${end}` : "bytes=0-15"));
    const env = { HF_ENDPOINT: hub.url };
    const err = await failure(
      judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path, fetch: stale }),
    );
    expect(err.data).toMatchObject({ problem: "hub_error", file: "m-Q4_K_M.gguf" });
    expect(err.message).toContain("the server sent bytes 0-15/");
  });

  test("a 403 or 404 from the download server the hub redirected to is hub_error, not the token's or the repo's", async () => {
    // A CDN's expired signed link, a proxy's block page: the token never went there.
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() });
    for (const status of [403, 404]) {
      const cdn = (async (input: string | URL | Request, init?: RequestInit) => {
        const url = String(input);
        if (url.startsWith("https://cdn.example/")) return new Response("denied", { status });
        if (url.includes("/resolve/"))
          return new Response(null, { status: 302, headers: { location: "https://cdn.example/blob?sig=x" } });
        return fetch(input, init);
      }) as typeof fetch;
      const env = { HF_ENDPOINT: hub.url, HF_TOKEN: TOKEN };
      const err = await failure(
        judged(parseModelRef("org/m:Q4_K_M"), config, env, { home: dir.path, fetch: cdn }),
      );
      expect(err.data).toMatchObject({ problem: "hub_error", status });
      expect(err.message).toContain("download server cdn.example");
    }
  });

  test("a hub that cannot be reached, and HF_HUB_OFFLINE=1, which never touches the network", async () => {
    using dir = tmpdir();
    const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    const url = `http://127.0.0.1:${closed.port}`;
    closed.stop(true);
    const down = await failure(
      judged(parseModelRef("org/m:Q4_K_M"), config, { HF_ENDPOINT: url }, { home: dir.path }),
    );
    expect(down.data).toMatchObject({ problem: "hub_unreachable" });
    // A mirror's user and password in HF_ENDPOINT are never said back.
    const secret = await failure(
      judged(
        parseModelRef("org/m:Q4_K_M"),
        config,
        { HF_ENDPOINT: url.replace("//", "//mirror-user:s3cret-pass@") },
        { home: dir.path },
      ),
    );
    expect(secret.data).toMatchObject({ problem: "hub_unreachable" });
    expect(secret.message).toContain(`the hub at ${url} could not`);
    expect(JSON.stringify({ m: secret.message, d: secret.data })).not.toMatch(/s3cret|mirror-user/);
    // A password of digits, then `#`, `?` or `/`, written unencoded: the parser reads the user as
    // the host, the digits as its port, the rest as a fragment, query or path, and no user at all.
    const refused = (async () => {
      throw new Error("Unable to connect");
    }) as unknown as typeof fetch;
    for (const sep of ["#", "?", "/"]) {
      const odd = await failure(
        judged(
          parseModelRef("org/m:Q4_K_M"),
          config,
          { HF_ENDPOINT: `https://mirror-user:1234${sep}s3cret@mirror.example` },
          { fetch: refused, home: dir.path },
        ),
      );
      expect(odd.data).toMatchObject({ problem: "hub_unreachable" });
      expect(odd.message).toContain("the hub at https://mirror.example could not");
      expect(JSON.stringify({ m: odd.message, d: odd.data })).not.toMatch(/s3cret|mirror-user/);
    }

    let calls = 0;
    const spy = (async () => {
      calls++;
      return new Response("[]");
    }) as unknown as typeof fetch;
    const offline = await failure(
      judged(
        parseModelRef("org/m:Q4_K_M"),
        config,
        { HF_ENDPOINT: url, HF_HUB_OFFLINE: "1" },
        { fetch: spy, home: dir.path },
      ),
    );
    expect(offline.data).toMatchObject({ problem: "hub_offline" });
    expect(calls).toBe(0);
  });
  test("an HF_ENDPOINT that is not a URL is said as such, with no request and no trace", async () => {
    using dir = tmpdir();
    const bad = await failure(
      judged(parseModelRef("org/m:Q4_K_M"), config, { HF_ENDPOINT: "not-a-url" }, { home: dir.path }),
    );
    expect(bad.data).toMatchObject({ problem: "hub_unreachable" });
    expect(bad.message).toContain('HF_ENDPOINT "not-a-url" is not a URL');
  });
});

describe("plan with a model not pulled yet", () => {
  const planDeps = { readModel: defaultPlanDeps.readModel, probe };

  test("an hf: model.path not in the cache is judged from the hub's header, and the plan says so", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() });
    writeFileSync(join(dir.path, "config.yaml"), "model:\n  path: hf:org/m:Q4_K_M\n");
    const source = {
      loadedConfig: () => loadConfig("config.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    const report = await planReportWithHub(
      source,
      {},
      { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "cache") },
      { plan: planDeps },
    );
    expect(report.plan.warnings[0]).toStartWith(
      "not downloaded; judged from the hub's header (org/m m-Q4_K_M.gguf at main)",
    );
    expect(report.plan.warnings[0]).toContain("local-ai pull org/m:Q4_K_M");
    expect(report.model.path).toBe(`${hub.url}/org/m/resolve/main/m-Q4_K_M.gguf`);

    // Offline: model_missing with the pull command, and not one request.
    const before = hub.requests.length;
    const err = await failure(
      planReportWithHub(
        source,
        {},
        { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "cache"), HF_HUB_OFFLINE: "1" },
        { plan: planDeps },
      ),
    );
    expect(err.code).toBe("model_missing");
    expect(err.message).toContain("local-ai pull org/m:Q4_K_M");
    expect(hub.requests.length).toBe(before);
  });

  test("offline, a token that cannot be used is not the error: the hub is not asked, so the pull is", async () => {
    // hubAccess read the token before the offline check: HF_HUB_OFFLINE with a mistyped HF_TOKEN
    // answered "the hub token cannot be used" for a model simply not downloaded.
    using dir = tmpdir();
    const source = {
      loadedConfig: () => loadConfig("absent.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    const env = { HF_HUB_CACHE: join(dir.path, "cache"), HF_HUB_OFFLINE: "1", HF_TOKEN: "hf_two words" };
    const err = await failure(
      planReportWithHub(source, { model: "hf:org/m:Q4_K_M" }, env, { plan: planDeps }),
    );
    expect(err.code).toBe("model_missing");
    expect(err.message).toContain("local-ai pull org/m:Q4_K_M");
    expect(err.message).not.toContain("token");
  });

  test("--model without a config; a hub error is added to the not-downloaded message", async () => {
    using dir = tmpdir();
    const hub = hubWith(dir.path, { "m-Q4_K_M.gguf": tinyModel() }, { token: TOKEN });
    const source = {
      loadedConfig: () => loadConfig("absent.yaml", dir.path),
      defaultConfig: () => defaultConfig(dir.path),
    };
    const env = { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "cache"), HF_TOKEN: TOKEN };
    const report = await planReportWithHub(source, { model: "hf:org/m:Q4_K_M" }, env, { plan: planDeps });
    expect(report.model.architecture).toBe("llama");

    const { HF_TOKEN: _, ...anonymous } = env;
    const err = await failure(
      planReportWithHub(source, { model: "hf:org/m:Q4_K_M" }, anonymous, { plan: planDeps }),
    );
    expect(err.message).toContain("not in the cache");
    expect(err.message).toContain("the hub's header could not be read either");
    expect(err.data).toMatchObject({ problem: "not_downloaded", hub_problem: "hub_unauthorized" });

    // A plain path is resolved against the base the caller gives (the CLI's working directory).
    writeGguf(dir.path, "local.gguf", tinyModel());
    const local = await planReportWithHub(source, { model: "local.gguf", base: dir.path }, env, {
      plan: planDeps,
    });
    expect(local.model.path).toBe(join(dir.path, "local.gguf"));

    const bad = await failure(planReportWithHub(source, { model: "hf:nope" }, env, { plan: planDeps }));
    expect(bad.code).toBe("invalid_request");
    // Without --model a missing config is still config_missing.
    expect((await failure(planReportWithHub(source, {}, env, { plan: planDeps }))).code).toBe(
      "config_missing",
    );
  });
});

test("a hub file the library refuses for what it holds is not_gguf, not a header cut short", async () => {
  using dir = tmpdir();
  // The writer's first entry is general.alignment (u32): "GGUF", version, two counts, key, type.
  const type = 24 + 8 + "general.alignment".length;
  for (const [quant, at, value, says] of [
    ["Q8_0", type + 4, 0, "general.alignment"],
    ["Q4_0", type, 13, "Unsupported metadata type: 13"],
  ] as const) {
    const file = `bad-${quant}.gguf`;
    const hub = hubWith(dir.path, { [file]: llama7b({ layers: 2 }) });
    const fd = openSync(join(dir.path, file), "r+");
    const bytes = new Uint8Array(4);
    new DataView(bytes.buffer).setUint32(0, value, true);
    writeSync(fd, bytes, 0, 4, at);
    closeSync(fd);
    const env = { HF_ENDPOINT: hub.url };
    const err = await failure(judged(parseModelRef(`org/m:${quant}`), config, env, { home: dir.path }));
    expect(err.data).toMatchObject({ problem: "not_gguf", file });
    expect(err.message).toContain(says);
  }
});
