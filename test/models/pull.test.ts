import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { blobPath, incompletePath, refPath, snapshotPath } from "../../src/models/hf-cache.ts";
import { type PullDeps, type PullOutcome, type PullRequest, pullModel } from "../../src/models/pull.ts";
import { writeFailure } from "../../src/models/pull-errors.ts";
import { StallGuard } from "../../src/models/stall-guard.ts";
import type { CoreError } from "../../src/protocol/errors.ts";
import type { DownloadProgress } from "../../src/protocol/pull.ts";
import { canMakeImmutable, makeImmutable, undoImmutable } from "../fixtures/full-disk.ts";
import { type HubStandIn, type Knobs, type StandInRepo, startHubStandIn } from "../fixtures/hub-stand-in.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Every behaviour against the hub stand-in (test/fixtures/hub-stand-in.ts says which public
// client code each answer follows); nothing here touches the network.

const MB = 1024 * 1024;
const bytes = (n: number, seed = 1) => {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
};
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

const MODEL = bytes(3 * MB);
const REPOS: StandInRepo[] = [
  {
    id: "org/model-GGUF",
    files: [
      { path: "README.md", content: new TextEncoder().encode("# model"), lfs: false },
      { path: "model-Q4_K_M.gguf", content: MODEL },
      { path: "model-Q8_0.gguf", content: bytes(1 * MB, 2) },
      { path: "big-F16-00001-of-00002.gguf", content: bytes(1 * MB, 3) },
      { path: "big-F16-00002-of-00002.gguf", content: bytes(MB / 2, 4) },
      { path: "small-in-git-Q2_K.gguf", content: bytes(4096, 5), lfs: false },
    ],
    revisions: { v1: "1".repeat(40) },
  },
  { id: "org/gated", files: [{ path: "g-Q4_0.gguf", content: bytes(MB, 6) }], gated: true },
  {
    id: "org/docs",
    files: [{ path: "README.md", content: new TextEncoder().encode("no models"), lfs: false }],
  },
];

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  // First, and not only in the test's finally: a test that timed out never reaches its finally,
  // and its folder cannot be removed while a file in it is immutable.
  undoImmutable();
  for (const o of open.splice(0)) await o.close();
});

async function setup(knobs: Knobs = {}, env: Record<string, string> = {}, repos = REPOS) {
  const hub = await startHubStandIn(repos, knobs);
  const dir = tmpdir("local-ai-pull-");
  open.push(hub, { close: async () => dir[Symbol.dispose]() });
  const cache = join(dir.path, "hub");
  const deps: PullDeps = {
    env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache, ...env },
    home: dir.path,
    freeSpace: () => 100 * 1024 * MB,
    pollMs: 50,
  };
  return { hub, dir: dir.path, cache, deps };
}

interface Run {
  result?: PullOutcome;
  error?: CoreError;
  events: DownloadProgress[];
  notes: string[];
}

async function pull(
  req: Partial<PullRequest> & { repo: string },
  deps: PullDeps,
  signal = new AbortController().signal,
): Promise<Run> {
  const events: DownloadProgress[] = [];
  const notes: string[] = [];
  try {
    const result = await pullModel({ revision: "main", ...req }, deps, {
      signal,
      progress: (p) => events.push(p),
      note: (n) => notes.push(n),
    });
    return { result, events, notes };
  } catch (err) {
    return { error: err as CoreError, events, notes };
  }
}

/** How many of this process's descriptors are open on `path` (Linux: /proc/self/fd). */
function descriptorsOpenOn(path: string): number {
  return readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  }).length;
}

/**
 * Whether this machine can mark a file immutable (root, on a Linux file system that keeps the
 * flag): a rename onto it is then refused with EPERM, as Windows refuses one onto a file in use.
 */
const immutableFiles = canMakeImmutable("pull");

/** A link maker refusing as Windows without developer mode does (symbolic links), or as a folder that takes none. */
const noLinks = () => {
  throw Object.assign(new Error("EPERM"), { code: "EPERM" });
};

const storageGets = (hub: HubStandIn) => hub.requests.filter((r) => r.server === "storage");

/** Nothing half-written under a final name: no blob, no snapshot entry for the file. */
function nothingFinal(cache: string, hub: HubStandIn, file: string, repo = "org/model-GGUF") {
  const sha = hub.sha256Of(repo, file);
  expect(existsSync(blobPath(cache, repo, sha))).toBe(false);
  expect(existsSync(snapshotPath(cache, repo, hub.commitOf(repo), file))).toBe(false);
}

describe("pull into the Hugging Face cache", () => {
  test("a quant lands as blob by sha256, a relative snapshot link, and refs/main holding the commit", async () => {
    const { hub, cache, deps } = await setup();
    const r = await pull({ repo: "org/model-GGUF", quant: "q4_k_m" }, deps);
    expect(r.error).toBeUndefined();
    const commit = hub.commitOf("org/model-GGUF");
    const sha = sha256(MODEL);
    const pointer = snapshotPath(cache, "org/model-GGUF", commit, "model-Q4_K_M.gguf");
    expect(r.result).toMatchObject({
      repo: "org/model-GGUF",
      revision: "main",
      commit,
      path: pointer,
      size_bytes: MODEL.length,
      sha256: sha,
      files: [{ file: "model-Q4_K_M.gguf", path: pointer, size_bytes: MODEL.length, sha256: sha }],
      warnings: [],
    });
    expect(lstatSync(pointer).isSymbolicLink()).toBe(true);
    expect(readlinkSync(pointer)).toBe(`../../blobs/${sha}`);
    expect(sha256(readFileSync(pointer))).toBe(sha);
    expect(readFileSync(refPath(cache, "org/model-GGUF", "main"), "utf8")).toBe(commit);
    // Only the blob, its snapshot and the ref: no .incomplete, no lock left behind.
    expect(readdirSync(join(cache, "models--org--model-GGUF", "blobs"))).toEqual([sha]);
    // The calls docs/models.md lists, pinned to the commit after the first.
    expect(hub.requests.map((q) => `${q.server} ${q.path.split("?")[0]}`)).toEqual([
      "hub /api/models/org/model-GGUF/revision/main",
      `hub /api/models/org/model-GGUF/tree/${commit}`,
      `hub /org/model-GGUF/resolve/${commit}/model-Q4_K_M.gguf`,
      `storage /lfs/${sha}`,
    ]);
    expect(r.events.at(-1)).toMatchObject({
      file: "model-Q4_K_M.gguf",
      bytes_done: MODEL.length,
      total: MODEL.length,
    });
  });

  test("a second pull of a cached file downloads nothing", async () => {
    const { hub, deps } = await setup();
    const first = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    const before = storageGets(hub).length;
    const again = await pull({ repo: "org/model-GGUF", file: "model-Q4_K_M.gguf" }, deps);
    expect(again.result).toEqual(first.result!);
    expect(storageGets(hub).length).toBe(before);
  });

  test("a split model comes whole; the result names the first part", async () => {
    const { cache, hub, deps } = await setup({ pageSize: 2 });
    const r = await pull({ repo: "org/model-GGUF", quant: "F16" }, deps);
    expect(r.error).toBeUndefined();
    expect(r.result!.files.map((f) => f.file)).toEqual([
      "big-F16-00001-of-00002.gguf",
      "big-F16-00002-of-00002.gguf",
    ]);
    expect(r.result!.path).toBe(
      snapshotPath(cache, "org/model-GGUF", hub.commitOf("org/model-GGUF"), "big-F16-00001-of-00002.gguf"),
    );
    expect(r.result!.size_bytes).toBe(MB + MB / 2);
    expect(new Set(r.events.map((e) => `${e.part}/${e.parts}`))).toEqual(new Set(["1/2", "2/2"]));
    // The listing came in pages (Link: rel="next").
    expect(hub.requests.filter((q) => q.path.includes("/tree/")).length).toBeGreaterThan(1);
  });

  test("a tag's ref is written; a commit as revision writes none", async () => {
    const { cache, deps } = await setup();
    const tag = await pull({ repo: "org/model-GGUF", quant: "Q8_0", revision: "v1" }, deps);
    expect(tag.result!.commit).toBe("1".repeat(40));
    expect(readFileSync(refPath(cache, "org/model-GGUF", "v1"), "utf8")).toBe("1".repeat(40));
    const pinned = await pull({ repo: "org/model-GGUF", quant: "Q8_0", revision: "1".repeat(40) }, deps);
    expect(pinned.result!.commit).toBe("1".repeat(40));
    expect(existsSync(refPath(cache, "org/model-GGUF", "1".repeat(40)))).toBe(false);
  });

  test("a file kept in git (no LFS) is checked against its git blob id and reported by sha256", async () => {
    const { cache, hub, deps } = await setup();
    const r = await pull({ repo: "org/model-GGUF", quant: "Q2_K" }, deps);
    expect(r.error).toBeUndefined();
    const content = bytes(4096, 5);
    expect(r.result!.sha256).toBe(sha256(content));
    // Named by its git blob id in blobs/, as huggingface_hub names non-LFS files (their ETag).
    const gitOid = createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
    expect(existsSync(blobPath(cache, "org/model-GGUF", gitOid))).toBe(true);
    expect(storageGets(hub)).toHaveLength(0); // served by the hub itself, no redirect
  });

  test("without a hash worker the bytes are hashed after the download, to the same result", async () => {
    const { deps } = await setup();
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, inlineHash: true });
    expect(r.result?.sha256).toBe(sha256(MODEL));
    const bad = await setup({ corruptAt: 10 });
    const c = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...bad.deps, inlineHash: true });
    expect(c.error?.data?.cause).toBe("checksum_mismatch");
  });

  test("the bench's sendfile storage (nativeStorage) serves a source file whole and from a Range", async () => {
    const dir = tmpdir("local-ai-native-");
    const source = join(dir.path, "src.gguf");
    const content = bytes(2 * MB, 9);
    writeFileSync(source, content);
    const hub = await startHubStandIn(
      [{ id: "org/disk", files: [{ path: "d-Q4_0.gguf", source, sha256: sha256(content) }] }],
      { nativeStorage: true },
    );
    open.push(hub, { close: async () => dir[Symbol.dispose]() });
    const cache = join(dir.path, "hub");
    const deps: PullDeps = {
      env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache },
      home: dir.path,
      freeSpace: () => 100 * 1024 * MB,
    };
    // A partial of the first MiB: the pull continues it with a Range request.
    const sha = sha256(content);
    const partial = incompletePath(cache, "org/disk", sha);
    mkdirSync(join(partial, ".."), { recursive: true });
    writeFileSync(partial, content.subarray(0, MB));
    const r = await pull({ repo: "org/disk", quant: "Q4_0" }, deps);
    expect(r.error).toBeUndefined();
    expect(r.result?.sha256).toBe(sha);
    expect(readFileSync(r.result!.path)).toEqual(Buffer.from(content));
    expect(storageGets(hub).map((g) => g.range)).toEqual([`bytes=${MB}-`]);
  });

  test("a disk that fills up during the download keeps the partial and says so", () => {
    const err = writeFailure(
      Object.assign(new Error("no space"), { code: "ENOSPC" }),
      { repo: "o/r", file: "f.gguf" },
      "/c/x.incomplete",
    ) as CoreError;
    expect(err.code).toBe("internal_error");
    expect(err.data).toMatchObject({ repo: "o/r", file: "f.gguf", cause: "disk_full" });
    expect(err.message).toBe(
      "o/r: f.gguf: the disk filled up while writing /c/x.incomplete (ENOSPC); the partial download is kept, free some space and pull again",
    );
    const ro = writeFailure(
      Object.assign(new Error("ro"), { code: "EROFS" }),
      { repo: "o/r" },
      "/c",
    ) as CoreError;
    expect(ro.data?.cause).toBe("cache_unwritable");
  });

  test("a file larger than its file system holds (FAT32) says so, not only EFBIG", () => {
    // Resumed, the partial fails again at once: moving the cache is the way out.
    const err = writeFailure(
      Object.assign(new Error("too big"), { code: "EFBIG" }),
      { repo: "o/r", file: "f.gguf" },
      "/c/x.incomplete",
    ) as CoreError;
    expect(err.data).toMatchObject({ cause: "cache_unwritable" });
    expect(err.message).toContain("cannot hold a file this large (EFBIG; FAT32 holds at most 4 GiB)");
    expect(err.message).toContain("set HF_HUB_CACHE or HF_HOME to a folder on another drive");
  });

  test("EFBIG from a fresh download's native write says so too, not a broken connection", () => {
    // Bun.write's failure goes through the stall guard first (body-writer.ts pumpNative): EFBIG
    // was taken for a cut connection, "pull again to resume", and only the resume said why.
    const stall = new StallGuard(new AbortController().signal, 60_000);
    try {
      const err = Object.assign(new Error("EFBIG: file too large, write"), { code: "EFBIG" });
      const where = { repo: "o/r", file: "f.gguf" };
      const told = (stall.explain(err, where, 2 ** 32 - 1, 5e9) ??
        writeFailure(err, where, "/c/x.incomplete")) as CoreError;
      expect(told.data).toMatchObject({ cause: "cache_unwritable" });
      expect(told.message).toContain("cannot hold a file this large");
    } finally {
      stall.stop();
    }
  });

  test("a disk that fills up writing the ref or the snapshot's copy claims no partial download", () => {
    // The blob is whole and in place by then: a pull again finds it and only links it.
    for (const path of ["/c/models--o--r/refs/main", "/c/models--o--r/snapshots/abc/f.gguf"]) {
      const err = writeFailure(
        Object.assign(new Error("no space"), { code: "ENOSPC" }),
        { repo: "o/r" },
        path,
      ) as CoreError;
      expect(err.data?.cause).toBe("disk_full");
      expect(err.message).not.toContain("partial");
      expect(err.message).toContain("free some space and pull again");
    }
  });

  test("where neither kind of link can be made the snapshot holds a copy, and the result says so", async () => {
    const { deps } = await setup();
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q8_0" },
      { ...deps, symlink: noLinks, hardlink: noLinks },
    );
    expect(r.error).toBeUndefined();
    expect(lstatSync(r.result!.path).isSymbolicLink()).toBe(false);
    expect(statSync(r.result!.path).size).toBe(MB);
    expect(r.result!.warnings.join()).toContain("does not allow links");
  });

  test("a cancel while the blob is copied into the snapshot ends the copy: no entry, no temp left", async () => {
    // A folder that takes no links (FAT, exFAT: a USB drive) gets a copy of gigabytes; a cancel
    // then waited for all of it, and the pull went on to the ref as if not cancelled.
    const { cache, hub, deps } = await setup();
    const ac = new AbortController();
    const cancelThenRefuse = () => {
      ac.abort(new Error("cancelled by the host"));
      noLinks();
    };
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q8_0" },
      { ...deps, symlink: noLinks, hardlink: cancelThenRefuse },
      ac.signal,
    );
    expect(r.error?.code).toBe("cancelled");
    const snapshot = dirname(snapshotPath(cache, "org/model-GGUF", hub.commitOf("org/model-GGUF"), "x"));
    expect(existsSync(snapshot) ? readdirSync(snapshot) : []).toEqual([]);
    expect(existsSync(refPath(cache, "org/model-GGUF", "main"))).toBe(false);
    // The verified blob stays: the next pull only links it.
    expect(
      existsSync(blobPath(cache, "org/model-GGUF", hub.sha256Of("org/model-GGUF", "model-Q8_0.gguf"))),
    ).toBe(true);
  });

  test("where symbolic links fail the snapshot is a hard link: the model takes its size once", async () => {
    const { cache, deps } = await setup();
    const r = await pull({ repo: "org/model-GGUF", quant: "Q8_0" }, { ...deps, symlink: noLinks });
    expect(r.error).toBeUndefined();
    // A copy would take the model's size twice (Windows without developer mode: every pull), past
    // what the space check counted before the download: disk_full once it is all downloaded.
    const blob = blobPath(cache, "org/model-GGUF", r.result!.sha256);
    expect(statSync(r.result!.path).ino).toBe(statSync(blob).ino);
    expect(r.result!.warnings).toEqual([]);
  });

  test("links refused as Bun names the refusals (ENOTSUP, Windows FAT's EISDIR) fall back to a copy", async () => {
    // Bun names Linux's EOPNOTSUPP (95) "ENOTSUP" (copyFileSync with COPYFILE_FICLONE_FORCE on
    // ext4 under Bun 1.4.5 throws code ENOTSUP, errno -95): a share refusing symbolic links so
    // (CIFS) was not taken for one without links. And Windows answers CreateHardLinkW on a FAT32
    // or exFAT drive with ERROR_INVALID_FUNCTION, which Bun's Win32 error map, like
    // libuv, names EISDIR: the copy meant for exactly that drive never ran, the pull failed
    // with cache_unwritable "(EISDIR)".
    const { deps } = await setup();
    const refusal = (code: string) => () => {
      throw Object.assign(new Error(code), { code });
    };
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q8_0" },
      { ...deps, symlink: refusal("ENOTSUP"), hardlink: refusal("EISDIR") },
    );
    expect(r.error).toBeUndefined();
    expect(r.result!.warnings.join()).toContain("does not allow links");
    expect(lstatSync(r.result!.path).isFile()).toBe(true);
  });

  test("the verified download is flushed to the drive before its blob name; a short blob is fetched again", async () => {
    // Renamed unflushed, a power cut left a short file under its verified sha256 name, and every
    // later pull took a blob of that name as in place: the model was broken for good.
    const { cache, deps } = await setup();
    const flushed: { size: number; named: boolean }[] = [];
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const first = await pull(req, {
      ...deps,
      flushBlob: async (path) => {
        const sha = basename(path).split(".")[0] as string;
        flushed.push({ size: statSync(path).size, named: existsSync(blobPath(cache, req.repo, sha)) });
      },
    });
    expect(first.error).toBeUndefined();
    expect(flushed).toEqual([{ size: MB, named: false }]);
    // What a power cut left of a blob renamed before its bytes reached the drive: a short file.
    const blob = realpathSync(first.result!.path);
    truncateSync(blob, MB / 2);
    const again = await pull(req, deps);
    expect(again.error).toBeUndefined();
    expect(statSync(blob).size).toBe(MB);
  });

  test("a cancel while the verified download is flushed ends the pull cancelled, with no snapshot entry", async () => {
    // The flush of gigabytes to a slow drive takes seconds to minutes: a cancel then was read by
    // nothing after it, so the pull went on to name the snapshot entry and answered a result,
    // the model pulled though the host had cancelled it (the copy's flush already checks).
    const { cache, hub, deps } = await setup();
    const ac = new AbortController();
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const r = await pull(
      req,
      { ...deps, flushBlob: async () => ac.abort(new Error("cancelled by the host")) },
      ac.signal,
    );
    expect(r.error).toMatchObject({ code: "cancelled", data: { bytes_done: MB, total: MB } });
    const snapshot = dirname(snapshotPath(cache, req.repo, hub.commitOf(req.repo), "x"));
    expect(existsSync(snapshot) ? readdirSync(snapshot) : []).toEqual([]);
    // Verified and flushed, the blob is kept: the next pull does not fetch or hash it again.
    expect(statSync(blobPath(cache, req.repo, sha256(bytes(MB, 2)))).size).toBe(MB);
  });

  test("the snapshot's copy is flushed to the drive before it is named the model", async () => {
    // A folder that takes no links is a FAT or exFAT drive, often a USB one: the copy went through
    // the page cache at disk speed and was renamed into place unflushed, gigabytes still dirty when
    // the pull said done. Unplugged then (or a power cut: FAT has no journal), the model's name
    // held a short file, and the next pull trusted the entry's place in the snapshot.
    const { cache, hub, deps } = await setup();
    const pointer = snapshotPath(cache, "org/model-GGUF", hub.commitOf("org/model-GGUF"), "model-Q8_0.gguf");
    const flushed: { size: number; named: boolean }[] = [];
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q8_0" },
      {
        ...deps,
        symlink: noLinks,
        hardlink: noLinks,
        flushCopy: async (path) => {
          flushed.push({ size: statSync(path).size, named: existsSync(pointer) });
        },
      },
    );
    expect(r.error).toBeUndefined();
    expect(flushed).toEqual([{ size: MB, named: false }]);
    expect(statSync(pointer).size).toBe(MB);
  });

  test("a drive that cannot flush still gets its copy; one whose flush fails to write fails the pull", async () => {
    // fsync is refused with EINVAL or ENOTSUP where a file system has no flush (some FUSE and
    // network ones): nothing better can be done there, and the copy is as good as before. EIO is
    // the drive saying bytes were lost: that copy must not be named the model.
    const refusing = (code: string) => async () => {
      throw Object.assign(new Error(code), { code });
    };
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const { deps } = await setup();
    const noFlush = await pull(req, {
      ...deps,
      symlink: noLinks,
      hardlink: noLinks,
      flushCopy: refusing("EINVAL"),
    });
    expect(noFlush.error).toBeUndefined();
    expect(statSync(noFlush.result!.path).size).toBe(MB);
    const other = await setup();
    const lost = await pull(req, {
      ...other.deps,
      symlink: noLinks,
      hardlink: noLinks,
      flushCopy: refusing("EIO"),
    });
    expect(lost.error).toMatchObject({ code: "internal_error", data: { cause: "cache_unwritable" } });
    expect(lost.error?.message).toContain("EIO");
    expect(
      readdirSync(dirname(snapshotPath(other.cache, req.repo, other.hub.commitOf(req.repo), "x"))),
    ).toEqual([]);
  });

  test("a cancel while the copy is flushed leaves no entry either", async () => {
    const { cache, hub, deps } = await setup();
    const ac = new AbortController();
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q8_0" },
      {
        ...deps,
        symlink: noLinks,
        hardlink: noLinks,
        flushCopy: async () => ac.abort(new Error("cancelled by the host")),
      },
      ac.signal,
    );
    expect(r.error?.code).toBe("cancelled");
    // The blob is whole and verified: the CLI read no sizes and said "the partial download is
    // kept … to resume" (cli/pull.ts stopLeft reads bytes_done = total as the file kept whole).
    expect(r.error?.data).toMatchObject({ bytes_done: MB, total: MB });
    const snapshot = dirname(snapshotPath(cache, "org/model-GGUF", hub.commitOf("org/model-GGUF"), "x"));
    expect(existsSync(snapshot) ? readdirSync(snapshot) : []).toEqual([]);
  });

  test("a pull again whose blob is in place keeps its progress beat through the snapshot's copy", async () => {
    // A folder that takes no links (FAT, exFAT: a USB drive) gets a copy, made again on each pull
    // (a copy is another file). With the blob already there no download started the reporter's
    // beat, so the copy of gigabytes ran minutes with no download_progress at all: the host's bar
    // froze, against the 500 ms the docs promise (docs/models.md "Progress").
    const { deps } = await setup();
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const first = await pull(req, { ...deps, symlink: noLinks, hardlink: noLinks });
    expect(first.result!.warnings.join()).toContain("does not allow links");
    let eventsBeforeCopy = -1;
    const events: DownloadProgress[] = [];
    const again = await pullModel(
      { revision: "main", ...req },
      {
        ...deps,
        symlink: noLinks,
        // The last way tried before the copy: what went out by then is all a host saw before it.
        hardlink: () => {
          eventsBeforeCopy = events.length;
          noLinks();
        },
      },
      { signal: new AbortController().signal, progress: (p) => events.push(p) },
    );
    expect(again.warnings.join()).toContain("does not allow links");
    expect(eventsBeforeCopy).toBeGreaterThanOrEqual(1);
    expect(events[0]).toMatchObject({ file: "model-Q8_0.gguf", bytes_done: MB, total: MB });
  });

  test("a hard-linked snapshot pulled again leaves no second name of the blob beside it", async () => {
    const { cache, deps } = await setup();
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const first = await pull(req, { ...deps, symlink: noLinks });
    const again = await pull(req, { ...deps, symlink: noLinks });
    expect(again.error).toBeUndefined();
    // POSIX rename() of a name onto another name of the same file does nothing: the temp link
    // stayed, a hidden name that kept the model's bytes on disk once the blob was removed.
    const blob = blobPath(cache, "org/model-GGUF", first.result!.sha256);
    expect(readdirSync(join(again.result!.path, ".."))).toEqual([basename(again.result!.path)]);
    expect(statSync(blob).nlink).toBe(2);
  });

  test("a model pulled again whose snapshot entry names its blob is not relinked (a model in use on Windows)", async () => {
    // Windows refuses to replace a name of a file a process has open without FILE_SHARE_DELETE:
    // llama-server's model. A second pull (a host making sure its model is there) replaced the
    // hard-linked entry anyway; refused (EPERM), it fell back to the next way and then to a copy
    // of gigabytes, whose rename failed too. Here the refusal is the link makers': the entry must
    // not be touched at all.
    const { cache, deps } = await setup();
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const first = await pull(req, { ...deps, symlink: noLinks });
    const blob = blobPath(cache, "org/model-GGUF", first.result!.sha256);
    const again = await pull(req, { ...deps, symlink: noLinks, hardlink: noLinks });
    expect(again.error).toBeUndefined();
    expect(again.result!.warnings).toEqual([]);
    expect(statSync(again.result!.path).ino).toBe(statSync(blob).ino);
    expect(statSync(blob).nlink).toBe(2);
  });

  test.skipIf(!immutableFiles)(
    "a snapshot entry that cannot be replaced fails the pull at once, not after trying every way and a copy",
    async () => {
      // Windows refuses to replace an entry llama-server has open (EPERM): with a copy there (made
      // where links failed, or by huggingface_hub without developer mode) the refused rename was
      // read as "no links here", and the pull went on to a hard link, then to a copy of gigabytes
      // past the space check, whose rename failed the same way. An immutable file stands in.
      const { deps } = await setup();
      const req = { repo: "org/model-GGUF", quant: "Q8_0" };
      const first = await pull(req, { ...deps, symlink: noLinks, hardlink: noLinks });
      expect(first.result!.warnings).toHaveLength(1);
      let hardlinks = 0;
      const counted = (target: string, path: string) => {
        hardlinks++;
        linkSync(target, path);
      };
      makeImmutable(first.result!.path);
      try {
        const again = await pull(req, { ...deps, hardlink: counted });
        expect(again.error?.data).toMatchObject({ cause: "cache_unwritable" });
        expect(again.error?.message).toContain("EPERM");
        expect(hardlinks).toBe(0);
        expect(readdirSync(dirname(first.result!.path)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
      } finally {
        undoImmutable();
      }
    },
  );

  test("the copy made where links fail does not hold up the core (ping, cancel, other requests)", async () => {
    // A blob in place (its name and its listed size) is not fetched again: a model of 48 MiB
    // there makes a copy that takes a while.
    const big = new Uint8Array(48 * MB).fill(7);
    const repo = { id: "org/model-GGUF", files: [{ path: "model-Q4_K_M.gguf", content: big }] };
    const { cache, deps } = await setup({}, {}, [repo]);
    const blob = blobPath(cache, "org/model-GGUF", sha256(big));
    mkdirSync(join(blob, ".."), { recursive: true });
    writeFileSync(blob, big);
    let ticks = 0;
    let copying = false;
    const beat = setInterval(() => {
      if (copying) ticks++;
    }, 1);
    let began = 0;
    const noLinks = () => {
      // The copy starts right after this.
      copying = true;
      began = performance.now();
      throw Object.assign(new Error("EPERM"), { code: "EPERM" });
    };
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q4_K_M" },
      { ...deps, symlink: noLinks, hardlink: noLinks },
    );
    copying = false;
    const took = performance.now() - began;
    clearInterval(beat);
    expect(r.error).toBeUndefined();
    expect(statSync(r.result!.path).size).toBe(48 * MB);
    // A synchronous copy of a model (gigabytes on Windows without developer mode, where links
    // fail) leaves every request unanswered until it ends: not one beat in the meantime. (A
    // file system that clones the file at once proves nothing either way.)
    if (took >= 10) expect(ticks).toBeGreaterThan(0);
  });
});

describe("resume and verify", () => {
  test("a connection cut mid-body keeps the partial; the next pull resumes it with Range", async () => {
    const { hub, cache, deps } = await setup({ cut: { after: MB + 123 } });
    const first = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(first.error?.code).toBe("internal_error");
    expect(first.error?.data).toMatchObject({
      repo: "org/model-GGUF",
      file: "model-Q4_K_M.gguf",
      cause: "connection_lost",
      reason: "connection_lost",
    });
    expect(first.error?.message).toContain("pull again to resume");
    const sha = sha256(MODEL);
    const partial = incompletePath(cache, "org/model-GGUF", sha);
    // What reached the disk before the cut (at most what was sent) is a true prefix of the file.
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThanOrEqual(MB + 123);
    expect(readFileSync(partial).equals(Buffer.from(MODEL.subarray(0, kept)))).toBe(true);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");

    const second = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(second.error).toBeUndefined();
    expect(second.result!.sha256).toBe(sha);
    expect(storageGets(hub).at(-1)!.range).toBe(`bytes=${kept}-`);
    expect(second.events.find((e) => e.phase === "download")!.bytes_done).toBe(kept);
    expect(existsSync(partial)).toBe(false);
  });

  test("a server that ignores Range: the download starts over, saying so, and still verifies", async () => {
    const { hub, cache, deps } = await setup({ ignoreRange: true });
    const sha = sha256(MODEL);
    // A partial from an earlier pull (its first megabyte, genuine).
    const partial = incompletePath(cache, "org/model-GGUF", sha);
    await Bun.write(partial, MODEL.subarray(0, MB));
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error).toBeUndefined();
    expect(r.result!.sha256).toBe(sha);
    expect(r.notes.join()).toContain("ignored the Range request");
    expect(r.result!.warnings).toEqual(r.notes);
    expect(storageGets(hub)[0]!.range).toBe(`bytes=${MB}-`);
  });

  test("a web page in the file's place (a sign-in portal, a proxy) is refused: a resume's partial is not lost to it", async () => {
    // A captive portal or a filtering proxy answers any URL with 200 and its HTML, often chunked
    // (no length to compare): a fresh download kept the page as the partial, which the next pull
    // resumed behind, to fail the checksum gigabytes later; a resume was restarted from byte 0,
    // its partial truncated and replaced by the page.
    const { hub, cache, deps } = await setup();
    const page = "<!doctype html><html><body>Sign in to the Wi-Fi</body></html>";
    const portal = (async (input: string | URL | Request, init?: RequestInit) => {
      if (!String(input).startsWith(hub.storageUrl)) return fetch(input, init);
      const body = new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(page));
          c.close();
        },
      });
      return new Response(body, { status: 200, headers: { "content-type": "text/html; charset=utf-8" } });
    }) as typeof fetch;
    const sha = sha256(MODEL);
    const partial = incompletePath(cache, "org/model-GGUF", sha);

    const fresh = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, fetch: portal });
    expect(fresh.error?.data).toMatchObject({ cause: "hub_error", file: "model-Q4_K_M.gguf" });
    expect(fresh.error?.message).toContain("text/html");
    expect(existsSync(partial)).toBe(false);

    writeFileSync(partial, MODEL.subarray(0, MB));
    const resumed = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, fetch: portal });
    expect(resumed.error?.data).toMatchObject({ cause: "hub_error" });
    expect(readFileSync(partial).equals(Buffer.from(MODEL.subarray(0, MB)))).toBe(true);

    const after = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(after.result?.sha256).toBe(sha);
    expect(storageGets(hub).at(-1)!.range).toBe(`bytes=${MB}-`);
  });

  test.skipIf(process.platform !== "linux")(
    "a restart from byte 0 that then breaks leaves no hash worker reading the partial",
    async () => {
      const { cache, deps } = await setup({ ignoreRange: true, cut: { after: MB / 2 } });
      const partial = incompletePath(cache, "org/model-GGUF", sha256(MODEL));
      await Bun.write(partial, MODEL.subarray(0, MB));
      const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
      expect(r.error?.data?.cause).toBe("connection_lost");
      expect(r.notes.join()).toContain("ignored the Range request");
      // Both hashes' workers (the resume's, stopped by the restart, and the restart's own) had
      // the partial open; a worker ended between its open and its close left the descriptor
      // open for the life of the core, one more per failed retry. The pull returns only once
      // its workers have closed the file: checked at once, no waiting on /proc.
      expect(descriptorsOpenOn(partial)).toBe(0);
    },
  );

  test("verifying a partial is shown as the check phase, from its first moment", async () => {
    const { cache, deps } = await setup();
    // A core killed after the last byte but before the rename: nothing to fetch, all to hash
    // (gigabytes: seconds to minutes without an event, a host would take the pull for hung).
    const partial = incompletePath(cache, "org/model-GGUF", sha256(MODEL));
    await Bun.write(partial, MODEL);
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error).toBeUndefined();
    expect(r.events[0]).toMatchObject({ phase: "check", total: MODEL.length, bytes_per_s: 0 });
    expect(r.events.at(-1)).toMatchObject({ phase: "download", bytes_done: MODEL.length });
  });

  test("a verified download that cannot be renamed into place fails naming the blob, the partial kept", async () => {
    // Windows: an antivirus scanning the fresh .incomplete refuses the rename (EPERM, EBUSY).
    // Here a folder takes the blob's name while the bytes arrive: the rename's raw error came
    // out as internal_error ("see the core's log"), saying nothing of the cache or the partial.
    const { cache, deps } = await setup();
    const sha = sha256(MODEL);
    const blob = blobPath(cache, "org/model-GGUF", sha);
    let events = 0;
    const r = await pullModel({ repo: "org/model-GGUF", quant: "Q4_K_M", revision: "main" }, deps, {
      signal: new AbortController().signal,
      progress: () => {
        if (events++ === 0) mkdirSync(join(blob, "taken"), { recursive: true });
      },
    }).catch((e: CoreError) => e);
    expect(r).toMatchObject({ code: "internal_error", data: { cause: "cache_unwritable" } });
    expect((r as CoreError).message).toContain(blob);
    expect(statSync(incompletePath(cache, "org/model-GGUF", sha)).size).toBe(MODEL.length);
  });

  test("a partial whose bytes are wrong fails the checksum on resume, and is deleted", async () => {
    const { hub, cache, deps } = await setup();
    const partial = incompletePath(cache, "org/model-GGUF", sha256(MODEL));
    await Bun.write(partial, bytes(MB, 99));
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error?.data?.cause).toBe("checksum_mismatch");
    expect(existsSync(partial)).toBe(false);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
    // …so the next pull starts clean and succeeds.
    expect((await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps)).result?.sha256).toBe(
      sha256(MODEL),
    );
  });

  test.skipIf(!immutableFiles)(
    "a partial that fails the checksum and cannot be deleted is still checksum_mismatch, naming it",
    async () => {
      // Windows: an antivirus scanning the fresh .incomplete refuses its deletion (EPERM, EBUSY).
      // The raw error came out as internal_error ("see the core's log"): neither the mismatch
      // nor the file the next pull checks again was said. An immutable file stands in.
      const { cache, deps } = await setup();
      const partial = incompletePath(cache, "org/model-GGUF", sha256(MODEL));
      await Bun.write(partial, bytes(MODEL.length, 99));
      makeImmutable(partial);
      try {
        const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
        expect(r.error?.data).toMatchObject({ cause: "checksum_mismatch", expected: sha256(MODEL) });
        expect(r.error?.message).toContain(`${partial} could not be deleted`);
      } finally {
        undoImmutable();
      }
    },
  );

  test("a body that fails the checksum is deleted, and the error names the hashes", async () => {
    const { hub, cache, deps } = await setup({ corruptAt: 2 * MB + 5 });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error?.code).toBe("internal_error");
    expect(r.error?.data).toMatchObject({
      cause: "checksum_mismatch",
      reason: "bad_response",
      expected: sha256(MODEL),
    });
    expect(r.error?.message).toContain(
      "org/model-GGUF: model-Q4_K_M.gguf: the downloaded bytes do not match",
    );
    expect(existsSync(incompletePath(cache, "org/model-GGUF", sha256(MODEL)))).toBe(false);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
  });

  test("a hub that lies about the size (X-Linked-Size) is refused before a byte is written", async () => {
    const { hub, cache, deps } = await setup({ linkedSize: 5 * MB });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error?.data?.cause).toBe("size_mismatch");
    expect(r.error?.message).toContain("X-Linked-Size");
    expect(storageGets(hub)).toHaveLength(0);
    // Nothing arrived, so nothing is left: not even an empty partial (issue 19 item 9).
    expect(existsSync(incompletePath(cache, "org/model-GGUF", sha256(MODEL)))).toBe(false);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
  });

  test("storage that announces more bytes than the hub lists is refused", async () => {
    const { hub, cache, deps } = await setup({ extraBytes: 100 });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error?.data?.cause).toBe("size_mismatch");
    expect(r.error?.message).toContain(`announces ${MODEL.length + 100} bytes`);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
  });

  test("storage that sends more bytes than the hub lists, without a length, is stopped and deleted", async () => {
    const { hub, cache, deps } = await setup({ extraBytes: 64 * 1024, omitLength: true });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error?.data?.cause).toBe("size_mismatch");
    expect(r.error?.message).toContain("sent more than");
    expect(existsSync(incompletePath(cache, "org/model-GGUF", sha256(MODEL)))).toBe(false);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
  });

  test("a connection that goes silent ends as a lost connection after the stall limit, partial kept", async () => {
    const { hub, cache, deps } = await setup({ hangAfter: 200_000 });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, stallMs: 400 });
    expect(r.error?.data).toMatchObject({ cause: "connection_lost", file: "model-Q4_K_M.gguf" });
    expect(r.error?.message).toContain("no data for 400 ms");
    expect(existsSync(incompletePath(cache, "org/model-GGUF", sha256(MODEL)))).toBe(true);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
  });

  test("a connection silent from its first byte claims no partial: the empty one is dropped", async () => {
    // The storage sends its headers, then nothing.
    const { hub, cache, deps } = await setup({ hangAfter: 0 });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, stallMs: 300 });
    expect(r.error?.data).toMatchObject({ cause: "connection_lost", bytes_done: 0 });
    expect(r.error?.message).toContain("after 0 of");
    expect(r.error?.message).not.toContain("kept");
    expect(existsSync(incompletePath(cache, "org/model-GGUF", sha256(MODEL)))).toBe(false);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
  });

  test("a slow but steady body is not a stall", async () => {
    const { deps } = await setup({ bytesPerSecond: 2 * MB });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q8_0" }, { ...deps, stallMs: 300 });
    expect(r.error).toBeUndefined();
  });
});

describe("cancel and concurrency", () => {
  test("cancel stops the download with cancelled, keeps the partial, and frees the lock", async () => {
    const { hub, cache, deps } = await setup({ bytesPerSecond: 2 * MB });
    const ac = new AbortController();
    const running = pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps, ac.signal);
    const sha = sha256(MODEL);
    const partial = incompletePath(cache, "org/model-GGUF", sha);
    while (!existsSync(partial) || statSync(partial).size < 200_000) await Bun.sleep(20);
    ac.abort();
    const r = await running;
    expect(r.error?.code).toBe("cancelled");
    expect(r.error?.message).toContain("partial download is kept");
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThan(0);
    expect(existsSync(`${blobPath(cache, "org/model-GGUF", sha)}.lock`)).toBe(false);
    nothingFinal(cache, hub, "model-Q4_K_M.gguf");
    hub.knobs.bytesPerSecond = undefined;
    const again = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(again.result?.sha256).toBe(sha);
    expect(storageGets(hub).at(-1)!.range).toBe(`bytes=${kept}-`);
  });

  test("two pulls of the same file at once: one writer, the other waits showing its progress", async () => {
    const { hub, deps } = await setup({ bytesPerSecond: 4 * MB });
    const [a, b] = await Promise.all([
      pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps),
      Bun.sleep(100).then(() => pull({ repo: "org/model-GGUF", file: "model-Q4_K_M.gguf" }, deps)),
    ]);
    expect(a.error).toBeUndefined();
    expect(b.error).toBeUndefined();
    expect(b.result!.path).toBe(a.result!.path);
    expect(storageGets(hub)).toHaveLength(1);
    // Whichever took the lock first wrote; the other waited, showing the writer's progress.
    const waited = [a, b].filter((r) => r.events.some((e) => e.phase === "wait" && e.bytes_done > 0));
    expect(waited).toHaveLength(1);
  });

  test("a lock held by another live process makes the pull wait; it goes on once that owner is gone", async () => {
    const { cache, hub, deps } = await setup();
    const sha = sha256(MODEL);
    const lock = `${blobPath(cache, "org/model-GGUF", sha)}.lock`;
    const other = Bun.spawn(["sleep", "30"]);
    (await import("node:fs")).mkdirSync(join(cache, "models--org--model-GGUF", "blobs"), { recursive: true });
    writeFileSync(lock, JSON.stringify({ pid: other.pid, id: "elsewhere", started: Date.now() }));
    const running = pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    await Bun.sleep(400);
    expect(storageGets(hub)).toHaveLength(0);
    other.kill("SIGKILL");
    await other.exited;
    const r = await running;
    expect(r.error).toBeUndefined();
    expect(r.events[0]!.phase).toBe("wait");
    expect(storageGets(hub)).toHaveLength(1);
  });

  test("cancel while waiting for another pull is cancelled too", async () => {
    const { cache, deps } = await setup();
    const lock = `${blobPath(cache, "org/model-GGUF", sha256(MODEL))}.lock`;
    const other = Bun.spawn(["sleep", "30"]);
    try {
      (await import("node:fs")).mkdirSync(join(cache, "models--org--model-GGUF", "blobs"), {
        recursive: true,
      });
      writeFileSync(lock, JSON.stringify({ pid: other.pid, id: "elsewhere", started: Date.now() }));
      const ac = new AbortController();
      const running = pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps, ac.signal);
      await Bun.sleep(150);
      ac.abort();
      const r = await running;
      expect(r.error?.code).toBe("cancelled");
      expect(r.error?.message).toContain("while another pull was downloading it");
    } finally {
      other.kill("SIGKILL");
    }
  });
});

describe("bad input and a hostile world", () => {
  test("an unknown repo, file or revision is not_found, naming it", async () => {
    const { deps } = await setup();
    const repo = await pull({ repo: "org/nope", quant: "Q4_K_M" }, deps);
    expect(repo.error?.code).toBe("invalid_request");
    expect(repo.error?.data).toMatchObject({
      repo: "org/nope",
      cause: "not_found",
      http_status: 404,
      hub_code: "RepoNotFound",
    });
    expect(repo.error?.message).toBe("org/nope: no such repo (the hub says: Repository not found)");
    const file = await pull({ repo: "org/model-GGUF", file: "absent.gguf" }, deps);
    expect(file.error?.data).toMatchObject({ cause: "not_found", file: "absent.gguf" });
    expect(file.error?.message).toContain("model-Q4_K_M.gguf");
    const rev = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M", revision: "nope" }, deps);
    expect(rev.error?.data).toMatchObject({
      cause: "not_found",
      hub_code: "RevisionNotFound",
      revision: "nope",
    });
  });

  test("the hub's 401 for an unknown repo to anonymous callers says a token may be needed", async () => {
    const { deps } = await setup({ anonymous401: true });
    const r = await pull({ repo: "org/private", quant: "Q4_K_M" }, deps);
    expect(r.error?.data).toMatchObject({ cause: "unauthorized", http_status: 401 });
    expect(r.error?.message).toContain("set HF_TOKEN");
  });

  test("an ambiguous quant, or a repo without GGUFs, is invalid_request listing what there is", async () => {
    const { deps } = await setup();
    const bare = await pull({ repo: "org/model-GGUF" }, deps);
    expect(bare.error?.data?.cause).toBe("ambiguous");
    expect(bare.error?.data?.quantizations).toEqual(["F16", "Q2_K", "Q4_K_M", "Q8_0"]);
    const none = await pull({ repo: "org/docs", quant: "Q4_K_M" }, deps);
    expect(none.error?.data?.cause).toBe("no_gguf");
  });

  test("a 403 or 404 from the download server the hub redirected to is hub_error, not the token's or the repo's", async () => {
    // The CDN refuses an expired signed link, a proxy blocks the download with its page: neither
    // is the hub's word on the token (which never went there) or the repo. It was `forbidden`,
    // "the token may not read this repo", an invalid_request a host reads as "ask for a token".
    for (const status of [403, 404]) {
      const { deps } = await setup({ fail: { status, where: "storage" } });
      const r = await pull({ repo: "org/model-GGUF", quant: "Q8_0" }, deps);
      expect(r.error?.code).toBe("internal_error");
      expect(r.error?.data).toMatchObject({ cause: "hub_error", http_status: status });
      expect(r.error?.message).toContain(`download server`);
      expect(r.error?.message).not.toContain("token");
    }
  });

  test("a gated repo: 401 without a token; the token from HF_TOKEN or the token file opens it; 403 when not granted", async () => {
    const { hub, deps, dir } = await setup();
    hub.tokens.add("hf_good");
    hub.tokens.add("hf_refused");
    hub.forbidden.add("hf_refused");
    const anon = await pull({ repo: "org/gated", quant: "Q4_0" }, deps);
    expect(anon.error?.code).toBe("invalid_request");
    expect(anon.error?.data).toMatchObject({
      cause: "unauthorized",
      hub_code: "GatedRepo",
      http_status: 401,
    });
    expect(anon.error?.message).toContain("gated");

    const refused = await pull(
      { repo: "org/gated", quant: "Q4_0" },
      { ...deps, env: { ...deps.env, HF_TOKEN: "hf_refused" } },
    );
    expect(refused.error?.data).toMatchObject({ cause: "forbidden", http_status: 403 });
    expect(JSON.stringify(refused.error)).not.toContain("hf_refused");
    expect(refused.error!.message).not.toContain("hf_refused");

    writeFileSync(join(dir, "token"), "hf_good\n");
    const viaFile = await pull(
      { repo: "org/gated", quant: "Q4_0" },
      { ...deps, env: { ...deps.env, HF_TOKEN_PATH: join(dir, "token") } },
    );
    expect(viaFile.error).toBeUndefined();
    // The token went to the hub's host only, never to the LFS storage the hub redirected to.
    const lastTwo = hub.requests.slice(-2);
    expect(lastTwo.map((q) => [q.server, q.authorized])).toEqual([
      ["hub", true],
      ["storage", false],
    ]);
  });

  test("5xx from the hub or from the storage is hub_error naming the status", async () => {
    const api = await setup({ fail: { status: 503, where: "api" } });
    const a = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, api.deps);
    expect(a.error?.code).toBe("internal_error");
    expect(a.error?.data).toMatchObject({ cause: "hub_error", reason: "server_error", http_status: 503 });
    expect(a.error?.message).toBe("org/model-GGUF: the hub answered HTTP 503 (the hub says: Internal Error)");
    const storage = await setup({ fail: { status: 500, where: "storage", times: 1 } });
    const s = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, storage.deps);
    expect(s.error?.data).toMatchObject({ cause: "hub_error", http_status: 500, file: "model-Q4_K_M.gguf" });
    nothingFinal(storage.cache, storage.hub, "model-Q4_K_M.gguf");
    expect((await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, storage.deps)).error).toBeUndefined();
  });

  test("an unreachable hub is connection_lost naming the endpoint's failure", async () => {
    const { deps } = await setup();
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q4_K_M" },
      { ...deps, env: { ...deps.env, HF_ENDPOINT: "http://127.0.0.1:9" } },
    );
    expect(r.error?.data).toMatchObject({ cause: "connection_lost", repo: "org/model-GGUF" });
    expect(r.error?.message).toContain("cannot reach the hub");
  });

  test("a hub whose API does not answer fails after the time limit, naming it", async () => {
    const { deps } = await setup({ apiDelayMs: 3000 });
    const t0 = Date.now();
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, apiTimeoutMs: 200 });
    expect(Date.now() - t0).toBeLessThan(2500);
    expect(r.error?.data).toMatchObject({ cause: "connection_lost", repo: "org/model-GGUF" });
    expect(r.error?.message).toContain("no answer within 0.2 s");
  });

  test("a full disk fails before any byte is fetched, saying what is needed and what is free", async () => {
    const { hub, deps, cache } = await setup();
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, freeSpace: () => 100 * MB });
    expect(r.error?.code).toBe("internal_error");
    expect(r.error?.data).toMatchObject({ cause: "disk_full", cache_dir: cache, available_bytes: 100 * MB });
    expect(r.error?.message).toContain("needs 3 MiB to download plus 128 MiB to spare");
    expect(storageGets(hub)).toHaveLength(0);
  });

  test("the space check counts a short blob in place (a power cut's) as all still to fetch", async () => {
    // A blob of another size than the listing's is downloaded again, all of it, but the space
    // check took its name as in place: on a near-full drive the pull fetched until the write
    // failed, not refused before any byte as a full disk is.
    const { hub, cache, deps } = await setup();
    const req = { repo: "org/model-GGUF", quant: "Q8_0" };
    const first = await pull(req, deps);
    truncateSync(blobPath(cache, req.repo, first.result!.sha256), MB / 2);
    const gets = storageGets(hub).length;
    const r = await pull(req, { ...deps, freeSpace: () => 100 * MB });
    expect(r.error?.data).toMatchObject({ cause: "disk_full", available_bytes: 100 * MB });
    expect(r.error?.message).toContain("needs 1 MiB to download");
    expect(storageGets(hub)).toHaveLength(gets);
  });

  test("the space check counts only what a resume still has to fetch", async () => {
    const { cache, deps } = await setup();
    const partial = incompletePath(cache, "org/model-GGUF", sha256(MODEL));
    await Bun.write(partial, MODEL.subarray(0, 2 * MB));
    let asked = "";
    const probe = (path: string) => {
      asked = path;
      return 128 * MB + MB + 1; // room for the margin and the last megabyte only
    };
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, { ...deps, freeSpace: probe });
    expect(r.error).toBeUndefined();
    expect(asked).toBe(cache);
  });

  test("a cache folder that cannot be written (a path under a regular file) fails clearly", async () => {
    const { deps, dir } = await setup();
    writeFileSync(join(dir, "a-file"), "");
    const bad = join(dir, "a-file", "hub");
    const r = await pull(
      { repo: "org/model-GGUF", quant: "Q4_K_M" },
      { ...deps, env: { ...deps.env, HF_HUB_CACHE: bad } },
    );
    expect(r.error?.data).toMatchObject({ cause: "cache_unwritable", cache_dir: bad });
    expect(r.error?.message).toContain("ENOTDIR");
    expect(r.error?.message).toContain("HF_HUB_CACHE");
  });

  test("HF_HUB_OFFLINE=1 refuses without touching the network", async () => {
    const { hub, deps } = await setup({}, { HF_HUB_OFFLINE: "1" });
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error?.data).toMatchObject({ cause: "offline" });
    expect(hub.requests).toHaveLength(0);
  });

  test("an HF_ENDPOINT that is not an http(s) URL is named as the cause, not a trace (a hostile review)", async () => {
    const { deps } = await setup();
    for (const [endpoint, says] of [
      ["not-a-url", 'HF_ENDPOINT "not-a-url" is not a URL'],
      ["http://[::1", "is not a URL"],
      ["ftp://mirror.example", "is a ftp: URL; only http and https are asked"],
      ["http://user:s3cret@[::1", "is not a URL"],
      // No scheme: `user:` would read as one and the password as its path; not a URL to a person.
      ["user:s3cret@mirror.example", 'HF_ENDPOINT "mirror.example" is not a URL'],
      ["mirror.example:8080", 'HF_ENDPOINT "mirror.example:8080" is not a URL'],
      ["https://user:s3/cret@mirror.example", 'HF_ENDPOINT "https://mirror.example" is not a URL'],
    ]) {
      const r = await pull(
        { repo: "org/model-GGUF", quant: "Q4_K_M" },
        { ...deps, env: { ...deps.env, HF_ENDPOINT: endpoint! } },
      );
      expect(r.error?.code).toBe("invalid_request");
      expect(r.error?.data).toMatchObject({ cause: "bad_endpoint" });
      expect(r.error?.message).toContain(says!);
      expect(r.error?.message).not.toContain("s3cret");
    }
  });

  test("a partial larger than the file is discarded and the download starts over", async () => {
    const { cache, deps, hub } = await setup();
    const partial = incompletePath(cache, "org/model-GGUF", sha256(MODEL));
    await Bun.write(partial, bytes(4 * MB, 7));
    const r = await pull({ repo: "org/model-GGUF", quant: "Q4_K_M" }, deps);
    expect(r.error).toBeUndefined();
    expect(r.notes.join()).toContain("larger than the file");
    expect(storageGets(hub)[0]!.range).toBeNull();
  });
});
