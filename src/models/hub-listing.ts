import { z } from "zod";
import { CoreError } from "../protocol/errors.ts";
import { readCapped } from "../util/capped-body.ts";
import { eachJsonArrayPiece, JsonElementTooLarge } from "../util/sliced-json-array.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import { type Env, endpointProblem, hubEndpoint, isOffline, shownEndpoint } from "./hf-cache.ts";
import { nextLink } from "./hub-client.ts";
import { TOO_LARGE_ENTRY } from "./hub-listing-page.ts";
import { readToken, UnusableToken, withoutToken } from "./hub-token.ts";
import { refusedEntry } from "./listed-entry.ts";
import { keepGguf } from "./pick-gguf.ts";

/**
 * The hub's file listing, and the one fetch edge the remote fit check goes through:
 *   GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true  → [{type, path, size, lfs?}]
 * (following `Link: <…>; rel="next"` pages). Parsing is pure; `hubFetch` maps every way a
 * request fails to a `model_missing` CoreError naming the repo and file, never the token.
 */

export interface HubFile {
  path: string;
  size: number;
  /** The LFS object's SHA-256, when the file lives in LFS (GGUFs do). */
  sha256: string | null;
}

/** How to reach the hub: the endpoint, the token (never logged), the fetch to use. */
export interface HubAccess {
  endpoint: string;
  token: string | null;
  fetch: typeof fetch;
  offline: boolean;
  /** Per request, body included: a hub that stops answering fails instead of hanging. */
  timeoutMs: number;
}

export const HUB_TIMEOUT_MS = 60_000;

/** How to reach the hub; a token that cannot be sent is `hub_unauthorized`, saying why but never showing it. */
export function hubAccess(env: Env, home: string, fetchImpl: typeof fetch = fetch): HubAccess {
  let token: string | null;
  try {
    token = readToken(env, home) ?? null;
  } catch (err) {
    if (!(err instanceof UnusableToken)) throw err;
    throw hubError("hub_unauthorized", `the hub token cannot be used: ${err.message}`, {});
  }
  return {
    endpoint: hubEndpoint(env),
    token,
    fetch: fetchImpl,
    offline: isOffline(env),
    timeoutMs: HUB_TIMEOUT_MS,
  };
}

const TreeEntrySchema = z
  .object({
    type: z.string(),
    path: z.string(),
    size: z.number().nonnegative().optional(),
    lfs: z.object({ oid: z.string(), size: z.number().nonnegative() }).loose().optional(),
  })
  .loose();

/**
 * The listing's files (folders dropped); throws when the body is not a tree listing, or names
 * the entry the core refuses (a path that leaves the repo, an LFS oid that is not a sha256).
 */
export function parseTreeListing(body: unknown): HubFile[] {
  const parsed = z.array(TreeEntrySchema).safeParse(body);
  if (!parsed.success) throw new Error("the hub's file listing is not a list of files");
  const files = parsed.data.filter((e) => e.type === "file");
  for (const e of files) {
    const refused = refusedEntry(e, false);
    if (refused) throw new Error(`the hub's file listing ${refused}`);
  }
  return files.map((e) => ({
    path: e.path,
    size: e.lfs?.size ?? e.size ?? 0,
    sha256: e.lfs?.oid.toLowerCase() ?? null,
  }));
}

function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

export function treeUrl(endpoint: string, repo: string, revision: string): string {
  return `${endpoint}/api/models/${encodePath(repo)}/tree/${encodeURIComponent(revision)}?recursive=true`;
}

export function resolveUrl(endpoint: string, repo: string, revision: string, file: string): string {
  return `${endpoint}/${encodePath(repo)}/resolve/${encodeURIComponent(revision)}/${encodePath(file)}`;
}

const MAX_PAGES = 100;
const CHECKED_A_SLICE = 5000;

/** The most all of a listing's pages together may bring: far more than a real repo's listing. */
const MAX_LISTING_BYTES = 64 * 1024 * 1024;

/**
 * The GGUF files of `repo` at `revision` on the hub (the only files a fit check reads); every
 * entry is checked, the others not kept. Past MAX_LISTED_GGUFS it is refused (pick-gguf.ts).
 */
export async function listRepoFiles(
  access: HubAccess,
  repo: string,
  revision: string,
  signal?: AbortSignal,
): Promise<HubFile[]> {
  const files: HubFile[] = [];
  const seen = new Set<string>();
  let budget = MAX_LISTING_BYTES;
  let url: string | null = treeUrl(access.endpoint, repo, revision);
  for (let page = 0; url; page++) {
    // A listing cut short or repeated would be taken for the repo's files: refused instead.
    const why = seen.has(url)
      ? "links back to a page it already gave"
      : page === MAX_PAGES
        ? `has more than ${MAX_PAGES} pages`
        : null;
    if (why) throw hubError("hub_error", `${repo}: the hub's file listing ${why}`, { repo });
    seen.add(url);
    const { res, at } = await hubFetchAt(access, url, { repo }, { signal });
    try {
      const read = await readCapped(res, budget);
      if (read.over)
        throw new Error(`the hub's file listing is larger than ${MAX_LISTING_BYTES / 1024 / 1024} MiB`);
      budget -= read.bytes.byteLength;
      await listingPieces(read.bytes, async (piece) => {
        // Checked in slices, the loop given back between: 10^5 entries were ~0.3 s of one turn.
        for (let i = 0; i < piece.length; i += CHECKED_A_SLICE) {
          await new Promise((r) => setImmediate(r)).then(() => signal?.throwIfAborted());
          for (const file of parseTreeListing(piece.slice(i, i + CHECKED_A_SLICE)))
            keepGguf(files, file, (why) => new Error(why));
        }
      });
      // Resolved against the URL that gave the page, after the redirects (RFC 8288 §3.2: a
      // renamed repo's 307 to its new name); one that is no URL at all is the hub's error, as a
      // page that is not JSON.
      url = nextLink(res.headers.get("link"), at);
    } catch (err) {
      if (signal?.aborted) throw err;
      throw hubError("hub_error", `${repo}: ${(err as Error).message}`, { repo });
    }
  }
  return files;
}

/**
 * A page's entries, parsed a piece at a time (util/sliced-json-array.ts: one parse of a 64 MiB
 * page held the loop ~0.3 s, `ping` and `cancel` waiting). JSON.parse's own error quotes the
 * first word it cannot read (`Unexpected identifier "hf_…"`): a mirror echoing the request's
 * token in a page had it in the error.
 */
async function listingPieces(bytes: Uint8Array, each: (piece: unknown[]) => Promise<void>): Promise<void> {
  let isList: boolean;
  try {
    isList = await eachJsonArrayPiece(bytes, each);
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    throw new Error(
      err instanceof JsonElementTooLarge ? TOO_LARGE_ENTRY : "the hub's file listing is not JSON",
    );
  }
  if (!isList) throw new Error("the hub's file listing is not a list of files");
}

export type HubProblem =
  | "hub_offline"
  | "hub_unreachable"
  | "hub_unauthorized"
  | "hub_not_found"
  | "hub_error";

function hubError(problem: HubProblem, message: string, data: object): CoreError {
  return new CoreError("model_missing", message, { problem, ...data });
}

const MAX_REDIRECTS = 5;

/** The request failed before an answer, or timed out (`err` is the fetch's error; it carries no token). */
export function unreachable(access: HubAccess, label: string, what: object, err: unknown): CoreError {
  const why =
    err instanceof Error && err.name === "TimeoutError"
      ? `no answer within ${access.timeoutMs / 1000} s`
      : err instanceof Error
        ? err.message
        : String(err);
  return hubError(
    "hub_unreachable",
    `${label}: the hub at ${shownEndpoint(access.endpoint)} could not be reached (${why})`,
    {
      ...what,
    },
  );
}

/**
 * GET through the hub: the token goes only to the hub's own origin (a redirect to a CDN drops
 * it), redirects are followed by hand for that reason, and any answer but 2xx (or 416, which a
 * range read past the end gets) becomes a CoreError saying what the hub meant.
 */
export async function hubFetch(
  access: HubAccess,
  url: string,
  what: { repo: string; file?: string },
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  return (await hubFetchAt(access, url, what, init)).res;
}

/** hubFetch, with the URL that gave the answer after the redirects (a relative link's context). */
async function hubFetchAt(
  access: HubAccess,
  url: string,
  what: { repo: string; file?: string },
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<{ res: Response; at: string }> {
  const label = what.file ? `${what.repo} ${what.file}` : what.repo;
  if (access.offline)
    throw hubError("hub_offline", `${label}: HF_HUB_OFFLINE is set, so the hub is not asked`, what);
  const badEndpoint = endpointProblem(access.endpoint);
  if (badEndpoint) throw hubError("hub_unreachable", `${label}: ${badEndpoint}`, what);
  const hubOrigin = new URL(access.endpoint).origin;
  let current = url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    // Bun's fetch reads file: URLs: a Location or a next page there would read a local file.
    const protocol = new URL(current).protocol;
    if (protocol !== "http:" && protocol !== "https:")
      throw hubError(
        "hub_error",
        `${label}: the hub pointed to a ${protocol} URL; only http and https are asked`,
        what,
      );
    const sameOrigin = new URL(current).origin === hubOrigin;
    const headers: Record<string, string> = { ...init.headers };
    if (access.token && sameOrigin) headers.Authorization = `Bearer ${access.token}`;
    const timeout = AbortSignal.timeout(access.timeoutMs);
    const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
    let res: Response;
    try {
      res = await access.fetch(current, { headers, redirect: "manual", signal });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw unreachable(access, label, what, err);
    }
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel();
      // A Location that is no URL is the hub's bad answer, not new URL's TypeError (an internal error).
      const next = URL.parse(location, current);
      if (!next) throw hubError("hub_error", `${label}: the hub redirected to a malformed URL`, what);
      current = next.toString();
      continue;
    }
    if (res.ok || res.status === 416) return { res, at: current };
    await res.body?.cancel();
    // Past the hub's redirect a 401/403/404 is the download server's (a CDN's expired link, a
    // proxy's block page): not the hub's word on the token, which never went there, or the repo.
    if (!sameOrigin && [401, 403, 404].includes(res.status))
      throw hubError(
        "hub_error",
        `${label}: the download server ${new URL(current).host} answered ${res.status}`,
        { ...what, status: res.status },
      );
    throw statusError(res, label, what, access.token);
  }
  throw hubError("hub_error", `${label}: the hub redirected more than ${MAX_REDIRECTS} times`, what);
}

function statusError(
  res: Response,
  label: string,
  what: { repo: string; file?: string },
  token: string | null,
): CoreError {
  const hasToken = token !== null;
  // The hub says which kind of 401/404 it is in X-Error-Code (it answers 401 for a repo that
  // does not exist, so as not to reveal private ones).
  const code = res.headers.get("x-error-code") ?? "";
  const data = { ...what, status: res.status };
  if (
    res.status === 404 ||
    code === "RepoNotFound" ||
    code === "EntryNotFound" ||
    code === "RevisionNotFound"
  ) {
    const which =
      code === "EntryNotFound"
        ? `has no file ${what.file ?? ""}`.trim()
        : code === "RevisionNotFound"
          ? "has no such revision"
          : `is not on the hub${hasToken ? "" : " (or it is private: set HF_TOKEN)"}`;
    return hubError("hub_not_found", `${label}: the repo ${which}`, data);
  }
  if (res.status === 401 || res.status === 403) {
    const why = hasToken
      ? "the token has no access to it (accept its terms on the hub?)"
      : "it needs a token: set HF_TOKEN, or save one with the hub's login";
    return hubError("hub_unauthorized", `${label}: ${res.status}: ${why}`, data);
  }
  // The reason phrase is the hub's (or a proxy's) text, any length: cut as llama-server's is,
  // the token taken out first (a proxy may quote it: hub-token.ts).
  const said = withoutToken(res.statusText, token);
  const reason = said.slice(0, wholeCharCut(said, 300));
  return hubError("hub_error", `${label}: the hub answered ${res.status} ${reason}`.trim(), data);
}
