import { join } from "node:path";
import { expandHome } from "../util/home-path.ts";

/**
 * The Hugging Face hub cache layout that Python's huggingface_hub and the JS hub client share
 * (so a file pulled by one is found by the others):
 *
 *   <cache>/models--<org>--<name>/blobs/<sha256 of an LFS file>
 *   <cache>/models--<org>--<name>/snapshots/<commit>/<path in repo>  → a link to ../../blobs/<sha>
 *   <cache>/models--<org>--<name>/refs/<revision>                     (holds the commit hash)
 *
 * Pure: every function takes the environment it reads, so tests pass their own.
 */

export type Env = Record<string, string | undefined>;

/**
 * `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
 * `~/.cache/huggingface/hub`; a leading `~` in each is the home folder, as huggingface_hub reads them.
 */
export function hubCacheDir(env: Env, home: string): string {
  if (env.HF_HUB_CACHE) return expandHome(env.HF_HUB_CACHE, home);
  return join(hfHome(env, home), "hub");
}

/** `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`. */
export function hfHome(env: Env, home: string): string {
  if (env.HF_HOME) return expandHome(env.HF_HOME, home);
  return join(
    env.XDG_CACHE_HOME ? expandHome(env.XDG_CACHE_HOME, home) : join(home, ".cache"),
    "huggingface",
  );
}

/** Where a saved token lives: `$HF_TOKEN_PATH`, else `<HF_HOME>/token`. `$HF_TOKEN` wins over the file. */
export function tokenFile(env: Env, home: string): string {
  return env.HF_TOKEN_PATH ? expandHome(env.HF_TOKEN_PATH, home) : join(hfHome(env, home), "token");
}

/** `HF_HUB_OFFLINE=1` (or true/yes/on): never touch the network. */
export function isOffline(env: Env): boolean {
  return ["1", "true", "yes", "on"].includes((env.HF_HUB_OFFLINE ?? "").trim().toLowerCase());
}

/** The hub's base URL: `$HF_ENDPOINT`, else the public hub; no trailing slash. */
export function hubEndpoint(env: Env): string {
  return (env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, "");
}

/**
 * What is wrong with the endpoint `$HF_ENDPOINT` gave (`hubEndpoint`), or null: a value that is not an http(s) URL would reach
 * `new URL` deep in a request and come out as a trace, or be blamed on the hub.
 */
export function endpointProblem(endpoint: string): string | null {
  let protocol: string;
  try {
    protocol = new URL(endpoint).protocol;
    if (protocol !== "http:" && protocol !== "https:" && !WITH_SCHEME.test(endpoint))
      throw new TypeError("no scheme");
  } catch {
    return `HF_ENDPOINT "${shownEndpoint(endpoint)}" is not a URL: set it to the hub's base URL, such as https://huggingface.co, or unset it`;
  }
  if (protocol === "http:" || protocol === "https:") return null;
  return `HF_ENDPOINT "${shownEndpoint(endpoint)}" is a ${protocol} URL; only http and https are asked: set it to the hub's base URL, such as https://huggingface.co, or unset it`;
}

/**
 * The endpoint as a message may show it: a user and password written into HF_ENDPOINT (a
 * mirror behind basic auth) are a secret, never echoed to a host, a log or a bug report.
 */
export function shownEndpoint(endpoint: string): string {
  let url: URL | undefined;
  try {
    url = new URL(endpoint);
  } catch {}
  if (url && (url.username || url.password)) {
    url.username = "";
    url.password = "";
    return url.toString().replace(/\/+$/, "");
  }
  // Any other `@` may end a user and password the parser read as something else: `user:pass@host`
  // (`user:` its scheme), `https://user:1234#pass@host` (a port, then a fragment, query or path).
  // All before the last `@` goes, a `/` in the password included; an `@` in a path costs its text.
  return endpoint.replace(/^([a-z][a-z\d+.-]*:\/\/)?.*@/is, "$1");
}

/** `scheme://`: without it, `user:pass@host` and `host:port` parse with a scheme of `user:`, `host:`. */
const WITH_SCHEME = /^\s*[a-z][a-z\d+.-]*:\/\//i;

/** `org/name` → `models--org--name`. */
export function repoFolderName(repo: string): string {
  return `models--${repo.split("/").join("--")}`;
}

export interface RepoPaths {
  root: string;
  blobs: string;
  snapshots: string;
  refs: string;
}

export function repoPaths(cacheDir: string, repo: string): RepoPaths {
  const root = join(cacheDir, repoFolderName(repo));
  return { root, blobs: join(root, "blobs"), snapshots: join(root, "snapshots"), refs: join(root, "refs") };
}

/** The blob a file's content lives in, named by its sha256 (the LFS oid). */
export function blobPath(cacheDir: string, repo: string, sha256: string): string {
  return join(repoPaths(cacheDir, repo).blobs, sha256);
}

/** A download in progress beside its blob (resumed by the next pull), as the cache convention does. */
export function incompletePath(cacheDir: string, repo: string, sha256: string): string {
  return `${blobPath(cacheDir, repo, sha256)}.incomplete`;
}

/** The file as the snapshot of `commit` shows it (a link to its blob). */
export function snapshotPath(cacheDir: string, repo: string, commit: string, file: string): string {
  return join(repoPaths(cacheDir, repo).snapshots, commit, ...file.split("/"));
}

/** The file naming the commit a revision (a branch or tag, `main` by default) pointed to when last pulled. */
export function refPath(cacheDir: string, repo: string, revision: string): string {
  return join(repoPaths(cacheDir, repo).refs, ...revision.split("/"));
}

/**
 * The snapshot folder a cached file lies in (`…/models--org--name/snapshots/<commit>`), or null
 * for a file outside the cache's layout: where `mmproj: auto` looks for a model's projector.
 */
export function snapshotRootOf(file: string): string | null {
  const parts = file.split(/[\\/]/);
  for (let i = parts.length - 3; i >= 1; i--)
    if (parts[i] === "snapshots" && parts[i - 1]!.startsWith("models--") && parts[i + 1] !== "")
      return parts.slice(0, i + 2).join(file.includes("\\") && !file.includes("/") ? "\\" : "/");
  return null;
}
