import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { blobPath, repoPaths } from "../../src/models/hf-cache.ts";
import { unstorableName, unstorablePath } from "../../src/models/listed-entry.ts";
import { type PullDeps, type PullOutcome, pullModel } from "../../src/models/pull.ts";
import type { CoreError } from "../../src/protocol/errors.ts";
import type { DownloadProgress } from "../../src/protocol/pull.ts";
import { procIdentity } from "../../src/runtime/proc-info.ts";
import { type Knobs, type StandInRepo, startHubStandIn, type TreeEntry } from "../fixtures/hub-stand-in.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 19 items 5 and 9: a hub that lies in its listing, and failures told as they are.
// Against the hub stand-in (test/fixtures/hub-stand-in.ts), which serves the real bytes while
// its `listing` says what a hostile hub would.

const MODEL = new Uint8Array(64 * 1024).map((_, i) => (i * 13 + 5) & 0xff);
const SHA = createHash("sha256").update(MODEL).digest("hex");

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

/** A repo holding one model, `m-Q4_K_M.gguf`, whose listing `rewrite` turns hostile. */
async function hubWith(rewrite?: (file: TreeEntry) => TreeEntry, knobs: Knobs = {}) {
  const repo: StandInRepo = {
    id: "org/evil",
    files: [{ path: "m-Q4_K_M.gguf", content: MODEL }],
    ...(rewrite ? { listing: (entries) => entries.map((e) => (e.type === "file" ? rewrite(e) : e)) } : {}),
  };
  const hub = await startHubStandIn([repo], knobs);
  const dir = tmpdir("local-ai-hostile-");
  open.push(hub, { close: async () => dir[Symbol.dispose]() });
  const cache = join(dir.path, "hub");
  const deps: PullDeps = {
    env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache },
    home: dir.path,
    freeSpace: () => 1024 * 1024 * 1024 * 100,
    pollMs: 20,
  };
  return { hub, dir: dir.path, cache, deps };
}

async function pull(deps: PullDeps): Promise<{ result?: PullOutcome; error?: CoreError }> {
  try {
    const result = await pullModel({ repo: "org/evil", quant: "Q4_K_M", revision: "main" }, deps, {
      signal: new AbortController().signal,
      progress: () => {},
    });
    return { result };
  } catch (err) {
    return { error: err as CoreError };
  }
}

/** Every path under `dir`, relative, links included (not followed). */
function tree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();
}

describe("a hostile listing is refused before anything is written (issue 19 item 5)", () => {
  test("a path with '..' would put the snapshot link outside the cache, over a file there", async () => {
    const { dir, cache, deps } = await hubWith((e) => ({ ...e, path: "../../../../victim-Q4_K_M.gguf" }));
    // snapshots/<commit>/../../../../ is the folder above the cache.
    const victim = join(dir, "victim-Q4_K_M.gguf");
    writeFileSync(victim, "precious");
    // The blob already in place (an earlier pull), so no download stands in the way of the link.
    mkdirSync(repoPaths(cache, "org/evil").blobs, { recursive: true });
    writeFileSync(blobPath(cache, "org/evil", SHA), MODEL);
    const r = await pull(deps);
    expect(r.error?.code).toBe("internal_error");
    expect(r.error?.data).toMatchObject({
      repo: "org/evil",
      cause: "bad_listing",
      reason: "bad_response",
      entry: "../../../../victim-Q4_K_M.gguf",
    });
    expect(r.error?.message).toBe(
      `org/evil: the hub's file listing names "../../../../victim-Q4_K_M.gguf", which has a '..' segment: a listed path must stay inside the repo; nothing was downloaded`,
    );
    expect(lstatSync(victim).isSymbolicLink()).toBe(false);
    expect(readFileSync(victim, "utf8")).toBe("precious");
    expect(tree(repoPaths(cache, "org/evil").snapshots)).toEqual([]);
  });

  test("absolute paths, backslashes, empty and '.' segments, control characters: each refused, naming it", async () => {
    const cases: [string, string][] = [
      ["/etc/m-Q4_K_M.gguf", "is an absolute path"],
      ["C:/m-Q4_K_M.gguf", "is an absolute path"],
      ["..\\..\\m-Q4_K_M.gguf", "has a backslash"],
      ["sub//m-Q4_K_M.gguf", "has an empty segment"],
      ["./m-Q4_K_M.gguf", "has a '.' segment"],
      ["sub/m-Q4_K_M.gguf\n", "has a control character"],
    ];
    for (const [path, why] of cases) {
      const { hub, deps } = await hubWith((e) => ({ ...e, path }));
      const r = await pull(deps);
      expect(r.error?.data).toMatchObject({ cause: "bad_listing", entry: path });
      expect(r.error?.message).toContain(`names ${JSON.stringify(path)}, which ${why}`);
      expect(hub.requests.filter((q) => q.path.includes("/resolve/"))).toEqual([]);
    }
  });

  test("a file name this system cannot store is refused before its download, not after", async () => {
    const cases: [string, NodeJS.Platform, string][] = [
      ["sub:stream/m-Q4_K_M.gguf", "win32", "has a character Windows file names cannot hold"],
      ["NUL.d/m-Q4_K_M.gguf", "win32", "is a Windows device name"],
      ["com1/m-Q4_K_M.gguf", "win32", "is a Windows device name"],
      ["sub./m-Q4_K_M.gguf", "win32", "ends with a dot or a space"],
      [`${"é".repeat(130)}/m-Q4_K_M.gguf`, "linux", "has a name longer than 255 characters"],
      [`${"é".repeat(256)}/m-Q4_K_M.gguf`, "win32", "has a name longer than 255 characters"],
    ];
    for (const [path, platform, why] of cases) {
      const { hub, deps } = await hubWith((e) => ({ ...e, path }));
      const r = await pull({ ...deps, platform });
      expect(r.error?.data).toMatchObject({ cause: "bad_listing", entry: path });
      expect(r.error?.message).toContain(`names ${JSON.stringify(path)}, which ${why}`);
      expect(hub.requests.filter((q) => q.path.includes("/resolve/"))).toEqual([]);
    }
    // The device names Windows maps as the core's own path checks know them (util/device-path.ts):
    // a space before the extension, COM0/LPT0 and the console's CONIN$/CONOUT$ too.
    for (const name of ["nul .gguf", "AUX  .d", "com0.gguf", "LPT0", "CONIN$", "conout$.gguf", "prn. "])
      expect(unstorableName(`sub/${name}`, "win32")).toContain("device name");
    // Names Windows refuses are fine elsewhere; plain ones everywhere.
    expect(unstorableName("sub:x./NUL.gguf", "linux")).toBeNull();
    expect(unstorableName("unsloth/Qwen3-8B-Q4_K_M.gguf", "win32")).toBeNull();
    expect(unstorableName("console.gguf", "win32")).toBeNull();
    // 130 characters of two bytes each: too long for ext4, not for NTFS.
    expect(unstorableName(`${"é".repeat(130)}.gguf`, "win32")).toBeNull();
  });

  test("an lfs.oid with '..' would link any local file as the model, unchecked: refused", async () => {
    const { dir, cache, deps } = await hubWith((e) => ({
      ...e,
      lfs: { ...e.lfs!, oid: "../../../secret.gguf" },
    }));
    // blobs/../../../ is the folder above the cache: a file there would be "the blob in place".
    writeFileSync(join(dir, "secret.gguf"), "not the model");
    const r = await pull(deps);
    expect(r.result).toBeUndefined();
    expect(r.error?.data).toMatchObject({ cause: "bad_listing", entry: "m-Q4_K_M.gguf" });
    expect(r.error?.message).toContain(
      `names "m-Q4_K_M.gguf" with lfs.oid "../../../secret.gguf", which is not a sha256 (64 hex characters)`,
    );
    expect(tree(repoPaths(cache, "org/evil").snapshots)).toEqual([]);
  });

  test("oids that are not hashes: an LFS oid of 40 characters, a git oid that is not 40 hex, a missing one", async () => {
    const cases: [(e: TreeEntry) => TreeEntry, string][] = [
      [(e) => ({ ...e, lfs: { ...e.lfs!, oid: "a".repeat(40) } }), "is not a sha256 (64 hex characters)"],
      [
        (e) => ({ ...e, lfs: { ...e.lfs!, oid: `${"a".repeat(63)}/` } }),
        "is not a sha256 (64 hex characters)",
      ],
      [
        (e) => ({ type: e.type, path: e.path, size: e.size, oid: "../x" }),
        "is not a git blob id (40 hex characters)",
      ],
      [(e) => ({ type: e.type, path: e.path, size: e.size }) as TreeEntry, "has no oid"],
      [(e) => ({ ...e, size: -1 }), "size -1 is not a byte count"],
    ];
    for (const [rewrite, why] of cases) {
      const { deps } = await hubWith(rewrite);
      const r = await pull(deps);
      expect(r.error?.data).toMatchObject({ cause: "bad_listing", entry: "m-Q4_K_M.gguf" });
      expect(r.error?.message).toContain(why);
    }
  });

  test("an honest listing still pulls (the checks refuse only what is wrong)", async () => {
    const { deps } = await hubWith();
    const r = await pull(deps);
    expect(r.error).toBeUndefined();
    expect(r.result?.sha256).toBe(SHA);
  });
});

describe("an encoded body though identity was asked for", () => {
  // Bun's fetch inflates a gzip body on its own but leaves Content-Length the compressed size:
  // a correct file read as a lying size, and a small answer could inflate to any size on disk.
  test("a gzipped file is refused as the hub's error naming the encoding, nothing written", async () => {
    const { hub, cache, deps } = await hubWith(undefined, { gzip: true });
    const r = await pull(deps);
    expect(r.error?.data).toMatchObject({ cause: "hub_error", reason: "server_error" });
    expect(r.error?.message).toContain("Content-Encoding: gzip");
    expect(hub.requests.some((q) => q.server === "storage")).toBe(true);
    expect(tree(repoPaths(cache, "org/evil").blobs)).toEqual([]);
  });

  test("a gzip bomb without a length is refused before a byte is inflated onto the disk", async () => {
    const { cache, deps } = await hubWith(undefined, {
      gzip: true,
      omitLength: true,
      extraBytes: 64 * 1024 * 1024,
    });
    const r = await pull(deps);
    expect(r.error?.data).toMatchObject({ cause: "hub_error" });
    expect(r.error?.message).toContain("Content-Encoding: gzip");
    expect(tree(repoPaths(cache, "org/evil").blobs)).toEqual([]);
  });

  test("a label that is no coding fetch applies (none, binary) leaves the bytes as sent: the pull succeeds", async () => {
    // fetch inflates only the compressions it knows; other labels reach the disk unchanged, and
    // the size and sha256 checks still stand. Refused, such a mirror could never be pulled from.
    for (const contentEncoding of ["none", "binary"]) {
      const { deps } = await hubWith(undefined, { contentEncoding });
      const r = await pull(deps);
      expect(r.error).toBeUndefined();
      expect(r.result?.sha256).toBe(SHA);
    }
  });
});

describe("a stale lock never blocks a pull for good (issue 19 item 6)", () => {
  const processStart = (pid: number) => procIdentity(pid)?.start_time ?? null;

  /** A pull that is cancelled after `ms`, so a wait without end fails the test. */
  async function pullWithin(deps: PullDeps, ms: number) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), ms);
    const events: DownloadProgress[] = [];
    const notes: string[] = [];
    try {
      const result = await pullModel({ repo: "org/evil", quant: "Q4_K_M", revision: "main" }, deps, {
        signal: ac.signal,
        progress: (p) => events.push(p),
        note: (n) => notes.push(n),
      });
      return { result, events, notes };
    } catch (err) {
      return { error: err as CoreError, events, notes };
    } finally {
      clearTimeout(timer);
    }
  }

  function lockFor(cache: string, owner: object): string {
    const lock = `${blobPath(cache, "org/evil", SHA)}.lock`;
    mkdirSync(repoPaths(cache, "org/evil").blobs, { recursive: true });
    writeFileSync(lock, JSON.stringify(owner));
    return lock;
  }

  test("its pid now names another process (after a reboot): taken over at once", async () => {
    const { cache, deps } = await hubWith();
    const other = Bun.spawn(["sleep", "30"]);
    try {
      lockFor(cache, { pid: other.pid, id: "before-reboot", started: 0, proc_start: "1" });
      const r = await pullWithin({ ...deps, processStart }, 5_000);
      expect(r.error).toBeUndefined();
      expect(r.result?.sha256).toBe(SHA);
      expect(r.events.filter((e) => e.phase === "wait")).toEqual([]);
    } finally {
      other.kill("SIGKILL");
    }
  });

  test("a live pid and no start time to compare: given up once it shows no progress for the bound", async () => {
    const { cache, deps } = await hubWith();
    const other = Bun.spawn(["sleep", "30"]);
    try {
      const lock = lockFor(cache, { pid: other.pid, id: "silent", started: 0 });
      const t0 = Date.now();
      const r = await pullWithin({ ...deps, processStart, lockQuietMs: 300 }, 5_000);
      expect(r.error).toBeUndefined();
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
      expect(r.events.some((e) => e.phase === "wait")).toBe(true);
      expect(r.notes.join("\n")).toContain(
        `m-Q4_K_M.gguf: the pull holding ${lock} (pid ${other.pid}) showed no progress for 0.3 s; taking it over`,
      );
      expect(r.result?.warnings).toEqual(r.notes);
    } finally {
      other.kill("SIGKILL");
    }
  });

  test("an owner that beats is waited for past the bound; its release lets the pull go on", async () => {
    const { cache, hub, deps } = await hubWith();
    const lock = `${blobPath(cache, "org/evil", SHA)}.lock`;
    mkdirSync(repoPaths(cache, "org/evil").blobs, { recursive: true });
    const script = `
      const { tryLock } = await import(${JSON.stringify(join(import.meta.dir, "../../src/models/download-lock.ts"))});
      const lock = tryLock(${JSON.stringify(lock)}, { heartbeatMs: 50 });
      console.log("held");
      setTimeout(() => { lock.release(); process.exit(0); }, 1200);
    `;
    const owner = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", timeout: 10_000 });
    const reader = owner.stdout.getReader();
    await reader.read();
    const r = await pullWithin({ ...deps, processStart, lockQuietMs: 400 }, 8_000);
    await owner.exited;
    expect(r.error).toBeUndefined();
    expect(r.notes).toEqual([]);
    expect(r.events.filter((e) => e.phase === "wait").length).toBeGreaterThan(0);
    expect(hub.requests.filter((q) => q.server === "storage")).toHaveLength(1);
  });
});

describe("failures told as they are (issue 19 item 9)", () => {
  test("a redirect loop says so: no HTTP status and no quote the hub did not send", async () => {
    const { deps } = await hubWith(undefined, { redirectLoop: true });
    const r = await pull(deps);
    expect(r.error?.code).toBe("internal_error");
    expect(r.error?.data).toMatchObject({ cause: "hub_error", http_status: 302 });
    expect(r.error?.message).toBe(
      "org/evil: m-Q4_K_M.gguf: the hub redirected more than 10 times (the last answer was HTTP 302)",
    );
  });

  test("an answer that is not what was asked for is said in the core's words, not put in the hub's mouth", async () => {
    const { deps } = await hubWith();
    const hub = await startHubStandIn([
      { id: "org/evil", files: [{ path: "m-Q4_K_M.gguf", content: MODEL }], listing: () => ({ a: 1 }) },
    ]);
    open.push(hub);
    const r = await pull({ ...deps, env: { ...deps.env, HF_ENDPOINT: hub.url } });
    expect(r.error?.data).toMatchObject({ cause: "hub_error" });
    expect(r.error?.data?.http_status).toBeUndefined();
    expect(r.error?.message).toBe("org/evil: the hub's file listing is not a list");
  });

  test("a token with a control character is refused before any request, saying why, never showing it", async () => {
    const { hub, dir, deps } = await hubWith();
    const secret = "hf_secret\u0007value";
    const viaEnv = await pull({ ...deps, env: { ...deps.env, HF_TOKEN: secret } });
    expect(viaEnv.error?.code).toBe("invalid_request");
    expect(viaEnv.error?.data).toMatchObject({ cause: "unauthorized" });
    expect(viaEnv.error?.message).toBe(
      "org/evil: the hub token cannot be used: HF_TOKEN holds a control character (a token is printable ASCII, such as hf_…); correct it or unset it",
    );
    const file = join(dir, "token");
    writeFileSync(file, "hf_secret\nvalue\n");
    const viaFile = await pull({ ...deps, env: { ...deps.env, HF_TOKEN_PATH: file } });
    expect(viaFile.error?.message).toContain(`the token file ${file} holds a control character`);
    for (const e of [viaEnv.error, viaFile.error]) expect(JSON.stringify(e)).not.toContain("secret");
    expect(hub.requests).toEqual([]);
  });

  test("a failure before any byte arrived leaves no .incomplete behind (500, 404, a redirect loop, a lying X-Linked-Size)", async () => {
    const knobs: Knobs[] = [
      { fail: { status: 500, where: "storage" } },
      { fail: { status: 404, where: "resolve" } },
      { redirectLoop: true },
      { linkedSize: 5 },
    ];
    for (const k of knobs) {
      const { cache, deps } = await hubWith(undefined, k);
      const r = await pull(deps);
      expect(r.error).toBeDefined();
      expect(tree(repoPaths(cache, "org/evil").blobs)).toEqual([]);
    }
  });
});

describe("a partial swapped for a link while its resume is on its way", () => {
  test("the resume's writes do not go through the link to the file it names", async () => {
    const { cache, dir, deps } = await hubWith();
    const blobs = repoPaths(cache, "org/evil").blobs;
    mkdirSync(blobs, { recursive: true });
    const partial = `${blobPath(cache, "org/evil", SHA)}.incomplete`;
    writeFileSync(partial, MODEL.subarray(0, 1000));
    // Someone else who can write the cache (a shared one) puts a link in its place between the
    // pull's look at the partial and its open for the resume: at the Range request, here.
    const victim = join(dir, "victim.txt");
    const before = Buffer.alloc(4000, 0x41);
    writeFileSync(victim, before);
    const real = fetch;
    deps.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
      if (new Headers(init?.headers).get("range") && existsSync(partial)) {
        fs.rmSync(partial);
        fs.symlinkSync(victim, partial);
      }
      return real(input, init);
    }) as typeof fetch;
    const { error } = await pull(deps);
    expect(readFileSync(victim).equals(before)).toBe(true);
    expect(error?.data).toMatchObject({ cause: "cache_unwritable" });
  });
});

describe("a revision whose ref this system cannot store", () => {
  test("a tag named as a Windows device is refused before the download, not at its ref after it", async () => {
    // refs/aux on Windows is the AUX device: the ref's rename failed once the model was down.
    const files = [{ path: "m-Q4_K_M.gguf", content: MODEL }];
    const hub = await startHubStandIn([{ id: "org/evil", files, revisions: { aux: "a".repeat(40) } }]);
    const dir = tmpdir("local-ai-hostile-");
    open.push(hub, { close: async () => dir[Symbol.dispose]() });
    const deps: PullDeps = {
      env: { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(dir.path, "hub") },
      home: dir.path,
      freeSpace: () => 1024 * 1024 * 1024 * 100,
      platform: "win32",
    };
    const req = { repo: "org/evil", quant: "Q4_K_M", revision: "aux" };
    const hooks = { signal: new AbortController().signal, progress: () => {} };
    const error = (await pullModel(req, deps, hooks).catch((e) => e)) as CoreError;
    expect(error.data).toMatchObject({ cause: "cache_unwritable", revision: "aux" });
    expect(error.message).toContain("pull it by its commit");
    expect(hub.requests.filter((q) => q.path.includes("/resolve/"))).toEqual([]);
    // Its commit writes no ref: that pull goes on.
    const byCommit = await pullModel({ ...req, revision: "a".repeat(40) }, deps, hooks);
    expect(byCommit.sha256).toBe(SHA);
  });
});

describe("a partial that is a hard link to a file outside the cache", () => {
  // One who can write a shared cache links another user's file in as the partial: a link
  // opened without following still writes that file's bytes, the resume appending after them,
  // a start-over truncating it.
  const linked = async (bytes: Buffer) => {
    const { cache, dir, deps } = await hubWith();
    mkdirSync(repoPaths(cache, "org/evil").blobs, { recursive: true });
    const victim = join(dir, "victim.txt");
    writeFileSync(victim, bytes);
    fs.linkSync(victim, `${blobPath(cache, "org/evil", SHA)}.incomplete`);
    return { victim, deps };
  };

  test("is not resumed into: the file it names is left as it was", async () => {
    const before = Buffer.alloc(4000, 0x41);
    const { victim, deps } = await linked(before);
    const { error } = await pull(deps);
    expect(readFileSync(victim).equals(before)).toBe(true);
    expect(error?.data).toMatchObject({ cause: "cache_unwritable" });
    expect(error?.message).toContain("remove it and pull again");
  });

  test("is not truncated for a start-over either (larger than the file)", async () => {
    const before = Buffer.alloc(MODEL.length + 10, 0x41);
    const { victim, deps } = await linked(before);
    const { error } = await pull(deps);
    expect(readFileSync(victim).equals(before)).toBe(true);
    expect(error?.data).toMatchObject({ cause: "cache_unwritable" });
  });
});

describe("a listed path longer than this system's paths", () => {
  test("is refused before its download, not when its snapshot link fails after it", async () => {
    // Each folder name fits (250 bytes), together they do not: 17 of them pass Linux's 4096.
    const path = `${`${"a".repeat(250)}/`.repeat(17)}m-Q4_K_M.gguf`;
    const { hub, deps } = await hubWith((e) => ({ ...e, path }));
    const r = await pull({ ...deps, platform: "linux" });
    expect(r.error?.data).toMatchObject({ cause: "bad_listing", entry: path });
    expect(r.error?.message).toContain("longer than this system's paths");
    expect(hub.requests.filter((q) => q.path.includes("/resolve/"))).toEqual([]);
    // macOS paths end at 1024 bytes: four such folders are too many there, not on Linux.
    const four = `${`${"a".repeat(250)}/`.repeat(4)}m-Q4_K_M.gguf`;
    expect(unstorablePath(`/c/${four}`, "darwin")).not.toBeNull();
    expect(unstorablePath(`/c/${four}`, "linux")).toBeNull();
  });

  test("the entry's temp beside it is counted as it is named: with its maker's pid", () => {
    // snapshot-temps.ts names it `.<pid>-<12 hex>.tmp`: counted as the 12 hex alone, a folder
    // 20 bytes under the limit passed, and the link failed ENAMETOOLONG after the download.
    const folder = `/${"a".repeat(250)}`.repeat(17).slice(0, 4095 - 20);
    expect(unstorablePath(`${folder}/m.gguf`, "linux")).not.toBeNull();
  });
});

describe("a listed path whose snapshot link is longer than a link may be", () => {
  test("is refused before its download, though the path itself fits", async () => {
    // 1400 one-letter folders: the path is under 3000 bytes, but the relative link to the blob
    // climbs them all (`../` 1400 times), past the 4095 bytes symlink() takes on Linux.
    const path = `${"a/".repeat(1400)}m-Q4_K_M.gguf`;
    const { hub, deps } = await hubWith((e) => ({ ...e, path }));
    const r = await pull({ ...deps, platform: "linux" });
    expect(r.error?.data).toMatchObject({ cause: "bad_listing", entry: path });
    expect(hub.requests.filter((q) => q.path.includes("/resolve/"))).toEqual([]);
  });
});
