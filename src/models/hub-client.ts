import { readCapped } from "../util/capped-body.ts";
import { causeText } from "../util/cause-text.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import { nextLinkTarget, readAnswerObject, readListingPage } from "./hub-listing-page.ts";
import { withoutToken } from "./hub-token.ts";
import { refusedEntry } from "./listed-entry.ts";
import { keepGguf } from "./pick-gguf.ts";

/**
 * The few Hugging Face hub calls a pull makes, over fetch (docs/models.md lists them):
 *
 *   GET /api/models/{repo}/revision/{rev}            the commit a branch or tag points to (`sha`)
 *   GET /api/models/{repo}/tree/{commit}?recursive=1 every file with its size and LFS oid (sha256),
 *                                                    paged by a `Link: <…>; rel="next"` header
 *   GET /{repo}/resolve/{commit}/{file}              302 to the LFS storage (X-Repo-Commit,
 *                                                    X-Linked-Etag, X-Linked-Size), then the
 *                                                    bytes, from an offset with `Range`
 *
 * Redirects are followed by hand, for the API calls too (a renamed repo's old name answers 307 to
 * the new one). The token goes only to the hub's own origin (its scheme, host and port): a redirect to another
 * host (the LFS storage), a listing page the hub's `Link` names elsewhere, or the hub's host over
 * plain http is asked without it, as huggingface_hub does for other hosts. Nothing here logs or
 * formats a header, so the token cannot end up in a message.
 */

/** The revision answer's one member read: its others (every file in `siblings`) are not kept. */
const SHA_ONLY: ReadonlySet<string> = new Set(["sha"]);

/** A file of a repo as the tree listing gives it. */
export interface HubFile {
  path: string;
  /** The content's size in bytes (the LFS object's size for LFS files). */
  size: number;
  /** The git blob id (sha1 of the git object). */
  oid: string;
  /** Present for LFS files: `oid` is the content's sha256. */
  lfs?: { oid: string; size: number };
}

/** A hub answer that is not a success, with the hub's own error code (`X-Error-Code`) when it sent one. */
export class HubError extends Error {
  constructor(
    readonly status: number,
    /** RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo… or null. */
    readonly hubCode: string | null,
    /** `X-Error-Message` or the body's `error`, trimmed; never contains request headers. */
    readonly serverMessage: string | null,
    readonly url: string,
  ) {
    super(`HTTP ${status}${hubCode ? ` ${hubCode}` : ""}${serverMessage ? `: ${serverMessage}` : ""}`);
    this.name = "HubError";
  }
}

/** The hub could not be reached, or the connection broke before an answer. */
export class HubUnreachable extends Error {
  constructor(
    readonly url: string,
    readonly causeText: string,
  ) {
    super(`cannot reach ${url}: ${causeText}`);
    this.name = "HubUnreachable";
  }
}

/**
 * An answer the core refuses (a listing entry that would leave the cache, too many redirects):
 * the words are the core's, never a status or a quote the hub did not send.
 */
export class HubBadAnswer extends Error {
  constructor(
    readonly url: string,
    message: string,
    /** The listed path the refusal is about, when it is one entry of the listing. */
    readonly entry?: string,
    /** The status of the answer refused, when it tells something (the last redirect's). */
    readonly status?: number,
  ) {
    super(message);
    this.name = "HubBadAnswer";
  }
}

export interface HubClientOptions {
  /** The hub's base URL, no trailing slash (`HF_ENDPOINT`). */
  endpoint: string;
  token?: string | undefined;
  fetch?: typeof fetch;
  /** An API call (revision, listing page) that has not answered by then has failed. */
  apiTimeoutMs?: number | undefined;
}

const API_TIMEOUT_MS = 30_000;

/** The most JSON one call, or all of a listing's pages together, may bring (a real listing is far less). */
const MAX_JSON_BYTES = 64 * 1024 * 1024;
const MAX_PAGES = 1000;
const MAX_REDIRECTS = 10;
/** Listed entries checked in one turn of the loop: 10^5 files were a second of checks in one, ping and cancel waiting. */
const CHECKED_A_SLICE = 5000;
const nextTurn = (s?: AbortSignal) => new Promise((r) => setImmediate(r)).then(() => s?.throwIfAborted());
/** What the resolve step said about the file, from the hub's headers before the redirect. */
export interface Linked {
  commit: string | null;
  /** `X-Linked-Etag` (the LFS sha256) or `ETag`, unquoted. */
  etag: string | null;
  size: number | null;
}

export interface OpenedFile {
  response: Response;
  linked: Linked;
}

export class HubClient {
  private readonly fetch: typeof fetch;

  constructor(private readonly options: HubClientOptions) {
    this.fetch = options.fetch ?? fetch;
  }

  /** The commit `revision` points to. */
  async commitOf(repo: string, revision: string, signal?: AbortSignal): Promise<string> {
    const url = `${this.options.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}`;
    return this.api(url, signal, async (res) => {
      const bad = (why: string) => new HubBadAnswer(url, why);
      const what = "the hub's answer for the revision";
      const value = await readAnswerObject(res, MAX_JSON_BYTES, what, () => nextTurn(signal), bad, SHA_ONLY);
      // JSON `null` too: its `.sha` threw a TypeError, the pull's internal_error.
      const sha = value && typeof value === "object" ? (value as { sha?: unknown }).sha : undefined;
      if (typeof sha !== "string" || !/^[0-9a-f]{40}$/.test(sha))
        throw new HubBadAnswer(url, "the hub's answer for the revision has no commit sha");
      return sha;
    });
  }

  /**
   * The GGUF files of the repo at `commit` (the only files a pull takes), following the listing's
   * pages; every entry is checked, but the others are not kept (a repo of 10^5 files was
   * mapped and filtered by the pick in one stretch). Past MAX_LISTED_GGUFS it is refused.
   */
  async listFiles(repo: string, commit: string, signal?: AbortSignal): Promise<HubFile[]> {
    let url: string | null = `${this.options.endpoint}/api/models/${repo}/tree/${commit}?recursive=true`;
    const files: HubFile[] = [];
    const seen = new Set<string>();
    let budget = MAX_JSON_BYTES;
    for (let page = 0; url; page++) {
      const here: string = url;
      // A listing cut short would be taken for the whole repo (a split model missing parts):
      // pages that loop or never stop are refused instead.
      if (seen.has(here))
        throw new HubBadAnswer(here, "the hub's file listing links back to a page it already gave");
      if (page === MAX_PAGES)
        throw new HubBadAnswer(here, `the hub's file listing has more than ${MAX_PAGES} pages`);
      seen.add(here);
      url = await this.api(here, signal, async (res, at) => {
        const refuse = (why: string) => new HubBadAnswer(at, why);
        const check = async (entries: unknown[]) => {
          for (const [i, entry] of entries.entries()) {
            if (i % CHECKED_A_SLICE === 0) await nextTurn(signal);
            keepGguf(files, toHubFile(entry, at), refuse);
          }
        };
        budget -= await readListingPage(res, budget, check, (why) => new HubBadAnswer(at, why));
        return nextLink(res.headers.get("link"), at);
      });
    }
    return files;
  }

  /**
   * Starts the download of `file` at `commit` from byte `start`: the hub's redirect is followed
   * by hand so the token stays with the hub's host. The caller reads (or cancels) the body.
   */
  async open(
    repo: string,
    commit: string,
    file: string,
    start: number,
    signal?: AbortSignal,
    /** Sees the hub's headers before the redirect is followed; may throw to stop there. */
    inspect?: (linked: Linked) => void,
  ): Promise<OpenedFile> {
    let url = `${this.options.endpoint}/${repo}/resolve/${commit}/${file.split("/").map(encodeURIComponent).join("/")}`;
    const headers: Record<string, string> = { "accept-encoding": "identity" };
    if (start > 0) headers.range = `bytes=${start}-`;
    let linked: Linked = { commit: null, etag: null, size: null };
    let redirected = 0;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const res = await this.request(url, signal, headers);
      if (hop === 0) {
        linked = linkedOf(res.headers);
        try {
          inspect?.(linked);
        } catch (err) {
          await res.body?.cancel();
          throw err;
        }
      }
      if (res.status >= 300 && res.status < 400 && res.headers.has("location")) {
        await res.body?.cancel();
        url = redirectTarget(res, url);
        redirected = res.status;
        continue;
      }
      if (!res.ok) throw this.elsewhere(await hubError(res, url, this.options.token));
      return { response: res, linked };
    }
    throw new HubBadAnswer(
      url,
      `the hub redirected more than ${MAX_REDIRECTS} times (the last answer was HTTP ${redirected})`,
      undefined,
      redirected,
    );
  }

  /**
   * A 401, 403 or 404 from the server the hub redirected the download to (a CDN's expired signed
   * link, a proxy's block page) is not the hub's word on the token, which never went there, or on
   * the repo: read as such it was "the token may not read this repo", a request to fix.
   */
  private elsewhere(err: HubError): HubError | HubBadAnswer {
    const at = new URL(err.url);
    if (at.origin === new URL(this.options.endpoint).origin || ![401, 403, 404].includes(err.status))
      return err;
    const said = err.serverMessage ? ` (it says: ${err.serverMessage})` : "";
    return new HubBadAnswer(
      err.url,
      `the download server ${at.host} answered HTTP ${err.status}${said}`,
      undefined,
      err.status,
    );
  }

  /** One JSON call with its own time limit (the download has a stall guard instead). */
  private async api<T>(
    url: string,
    signal: AbortSignal | undefined,
    /** `at`: the URL that answered, after the redirects (a relative next page is read from it). */
    read: (res: Response, at: string) => Promise<T>,
  ): Promise<T> {
    const ms = this.options.apiTimeoutMs ?? API_TIMEOUT_MS;
    const timeout = AbortSignal.timeout(ms);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      const { res, at } = await this.followed(url, both, { accept: "application/json" });
      if (!res.ok) throw await hubError(res, at, this.options.token);
      return await read(res, at);
    } catch (err) {
      if (signal?.aborted) throw signal.reason ?? err;
      if (timeout.aborted) throw new HubUnreachable(url, `no answer within ${ms / 1000} s`);
      throw err;
    }
  }

  /**
   * An API call with the hub's redirects followed by hand (a renamed repo's old name answers a
   * relative 307 to the new one, which huggingface_hub follows): each hop through `request`, so
   * the token stays with the hub's origin. Returns the last answer and the URL that gave it.
   */
  private async followed(
    url: string,
    signal: AbortSignal,
    headers: Record<string, string>,
  ): Promise<{ res: Response; at: string }> {
    let at = url;
    for (let hop = 0; ; hop++) {
      const res = await this.request(at, signal, headers);
      if (res.status < 300 || res.status >= 400 || !res.headers.has("location")) return { res, at };
      await res.body?.cancel();
      if (hop === MAX_REDIRECTS)
        throw new HubBadAnswer(
          at,
          `the hub redirected more than ${MAX_REDIRECTS} times (the last answer was HTTP ${res.status})`,
          undefined,
          res.status,
        );
      at = redirectTarget(res, at);
    }
  }

  private async request(
    url: string,
    signal: AbortSignal | undefined,
    headers: Record<string, string>,
  ): Promise<Response> {
    // Bun's fetch reads file: URLs: a redirect or a Location to file:///proc/self/fd/0 would
    // have the core read its own stdin (the protocol) or copy a local file in as a model.
    const protocol = new URL(url).protocol;
    if (protocol !== "http:" && protocol !== "https:")
      throw new HubBadAnswer(url, `the hub pointed to a ${protocol} URL; only http and https are asked`);
    const all: Record<string, string> = { "user-agent": "local-ai", ...headers };
    const toHub = new URL(url).origin === new URL(this.options.endpoint).origin;
    if (toHub && this.options.token) all.authorization = `Bearer ${this.options.token}`;
    try {
      return await this.fetch(url, { headers: all, redirect: "manual", ...(signal ? { signal } : {}) });
    } catch (err) {
      if (signal?.aborted) throw signal.reason ?? err;
      throw new HubUnreachable(url, causeText(err, 200));
    }
  }
}

/** A file entry of the listing, checked before any path or blob name is made of it; folders are skipped. */
function toHubFile(item: unknown, url: string): HubFile | undefined {
  if (!item || typeof item !== "object") return undefined;
  const e = item as Record<string, unknown>;
  if (e.type !== "file") return undefined;
  if (typeof e.path !== "string")
    throw new HubBadAnswer(url, `the hub's file listing has a file without a path`);
  const refused = refusedEntry({ ...e, path: e.path }, true);
  if (refused) throw new HubBadAnswer(url, `the hub's file listing ${refused}`, e.path);
  const file: HubFile = { path: e.path, size: e.size as number, oid: String(e.oid ?? "").toLowerCase() };
  const lfs = e.lfs as { oid: string; size: number } | undefined;
  if (lfs) {
    file.lfs = { oid: lfs.oid.toLowerCase(), size: lfs.size };
    file.size = lfs.size;
  }
  return file;
}

function linkedOf(h: Headers): Linked {
  const size = Number.parseInt(h.get("x-linked-size") ?? "", 10);
  const etag = h.get("x-linked-etag") ?? h.get("etag");
  return {
    commit: h.get("x-repo-commit"),
    etag: etag ? etag.replace(/^W\//, "").replace(/"/g, "").trim().toLowerCase() : null,
    size: Number.isFinite(size) ? size : null,
  };
}

/**
 * A redirect's Location, resolved against the URL that answered it. One that is no URL (`http://[`)
 * is the hub's bad answer: new URL's TypeError reached the pull as an unexpected error.
 */
function redirectTarget(res: Response, url: string): string {
  try {
    return new URL(res.headers.get("location")!, url).toString();
  } catch {
    throw new HubBadAnswer(
      url,
      `the hub redirected to a malformed URL (HTTP ${res.status})`,
      undefined,
      res.status,
    );
  }
}

/**
 * The `rel="next"` URL of a Link header, resolved against the page's URL. One that is no URL
 * (`<http://[>`) is the hub's bad answer: new URL's TypeError reached the pull as internal_error.
 */
export function nextLink(header: string | null, base: string): string | null {
  const target = header ? nextLinkTarget(header) : null;
  if (target === null) return null;
  return URL.parse(target, base)?.toString() ?? badNext(base);
}

const badNext = (url: string): never => {
  throw new HubBadAnswer(url, "the hub's file listing links its next page to a malformed URL");
};

async function hubError(res: Response, url: string, token: string | undefined): Promise<HubError> {
  let message = res.headers.get("x-error-message");
  if (!message) {
    try {
      // The start of the body is enough to quote: one that never ends is not read to its end.
      const text = new TextDecoder().decode((await readCapped(res, 2000)).bytes);
      const parsed = JSON.parse(text) as { error?: unknown };
      if (typeof parsed.error === "string") message = parsed.error;
    } catch {
      // Not JSON (an HTML error page): the status says enough.
    }
  } else {
    await res.body?.cancel();
  }
  // The code is the hub's word too (a short name such as GatedRepo): a mirror may put anything
  // there, the token included, and it goes into the error's message and the pull's `hub_code`.
  // Cut between characters: a lone surrogate is no text a host's strict JSON reader takes.
  const said = (text: string | null, max: number) => {
    const t = text && withoutToken(text, token).trim();
    return t ? t.slice(0, wholeCharCut(t, max)) || null : null;
  };
  return new HubError(res.status, said(res.headers.get("x-error-code"), 100), said(message, 300), url);
}
