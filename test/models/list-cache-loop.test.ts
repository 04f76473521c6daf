import { describe, expect, spyOn, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { cachedCandidates, folderCandidates } from "../../src/models/list-candidates.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { logger } from "../../src/util/logger.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

// The hub cache (or one repo's folder, a link onto another drive) on a network share gone
// offline: a stat can answer from cached attributes where its listing hangs (an NFS client whose
// server is gone), and a readdirSync of it held the whole core, ping and cancel too.

const nextTurn = () => new Promise<string>((r) => setImmediate(() => r("the loop's next turn")));
const answering = (statWaitMs = 30_000) =>
  new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs, lanes: 4 });

describe("models: the hub cache listed off the loop", () => {
  test("a cache whose listing hangs lets the loop turn, and is given up after the drive's wait", async () => {
    let answer: (names: string[]) => void = () => {};
    const hangs = () =>
      new Promise<string[]>((r) => {
        answer = r;
      });
    const listed = cachedCandidates("/nas/hub", { drives: answering(), readdir: hangs });
    expect(await Promise.race([listed, nextTurn()])).toBe("the loop's next turn");
    answer([]);
    expect(await listed).toEqual([]);
    const never = () => new Promise<string[]>(() => {});
    expect(await cachedCandidates("/nas/hub2", { drives: answering(1), readdir: never })).toEqual([]);
  });

  test("a repo whose snapshots' listing hangs is left out; the others are listed", async () => {
    using dir = tmpdir();
    const cache = join(dir.path, "cache");
    layRepo(cache, "org/near", { "n-Q4_K_M.gguf": tinyModel() });
    const far = layRepo(cache, "org/far", { "f-Q4_K_M.gguf": tinyModel() });
    // The near repo's listings and walk answer within the turn (read here, handed back resolved):
    // the 1 ms drive wait that gives up on the far one must not race a real read of the near one.
    const list = (folder: string) =>
      folder.startsWith(join(cache, "models--org--far"))
        ? new Promise<string[]>(() => {})
        : Promise.resolve(readdirSync(folder));
    // The near snapshot is flat: its GGUFs are its names.
    const snapshotFiles = (snapshot: string) =>
      Promise.resolve(readdirSync(snapshot).filter((n) => n.endsWith(".gguf")));
    // The walk's deadline well past the far repo's 1 ms: this is about that repo's own wait.
    const reads = { drives: answering(1), readdir: list, snapshotFiles, walkWaitMs: 60_000 };
    const found = await cachedCandidates(cache, reads);
    expect(found.map((c) => `${c.repo}:${c.file}`)).toEqual(["org/near:n-Q4_K_M.gguf"]);
    expect(far.snapshot).toContain("models--org--far");
  });

  test("a folder beside the config whose listing hangs lets the loop turn, and is given up after the wait", async () => {
    let answer: (names: { names: string[]; undecodable: Set<string> }) => void = () => {};
    const folderNames = () =>
      new Promise<{ names: string[]; undecodable: Set<string> }>((r) => {
        answer = r;
      });
    const listed = folderCandidates("/nas/models", { drives: answering(), folderNames });
    expect(await Promise.race([listed, nextTurn()])).toBe("the loop's next turn");
    answer({ names: ["a.gguf"], undecodable: new Set() });
    expect((await listed).map((c) => c.model_path)).toEqual([join("/nas/models", "a.gguf")]);
    const never = () => new Promise<{ names: string[]; undecodable: Set<string> }>(() => {});
    expect(await folderCandidates("/nas/other", { drives: answering(1), folderNames: never })).toEqual([]);
  });
});

/** Folders whose stats answer (an NFS client's cached attributes) and whose listings never do, in `lanes` lanes. */
function deadFolders(lanes: number) {
  const drives = new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs: 1, lanes });
  const started: string[] = [];
  const folderNames = (folder: string) => {
    started.push(folder);
    return new Promise<{ names: string[]; undecodable: Set<string> }>(() => {});
  };
  return { drives, started, folderNames };
}

describe("models: listings that hang share the stats' lanes", () => {
  // Each listing that hangs holds one of the runtime's few file threads, for good on a hard-mounted
  // share. Started outside the drive's lanes (util/drive-answers.ts), folders beside the config
  // on one dead share (their stats answered from cached attributes) took every thread: each file
  // read and write of the core then waited with them.
  test("once every lane holds a listing that does not answer, no other listing is started", async () => {
    const { drives, started, folderNames } = deadFolders(1);
    const reads = { drives, folderNames };
    expect(await folderCandidates("/dead/lanes-a", reads)).toEqual([]);
    expect(await folderCandidates("/dead/lanes-b", reads)).toEqual([]);
    expect(
      await cachedCandidates("/dead/lanes-hub", { drives, readdir: () => new Promise(() => {}) }),
    ).toEqual([]);
    expect(started).toEqual(["/dead/lanes-a"]);
    expect(await drives.statOf("/dead/lanes-c")).toBe("late"); // stats too: the lane is held
  });
});

describe("models: the hub cache's whole walk has one deadline", () => {
  // Repos walked one after another, each a dead link onto a share gone: each waited the full
  // drive wait (30 s), and a `models` over a cache of several answered minutes later. The walk's
  // deadline (1 ms here, twice the drive's 30 s in the core) leaves the rest out, never started.
  test("repos left when the walk's deadline is over are not listed", async () => {
    const listed: string[] = [];
    const readdir = (folder: string) => {
      listed.push(folder);
      if (folder === "/dead/hub") return Promise.resolve(["models--a--x", "models--b--y", "models--c--z"]);
      return new Promise<string[]>(() => {});
    };
    // Each listing's own wait (5 ms) is past the walk's (1 ms): only the deadline ends the first.
    const found = await cachedCandidates("/dead/hub", { drives: answering(5), readdir, walkWaitMs: 1 });
    expect(found).toEqual([]);
    expect(listed).toEqual(["/dead/hub", join("/dead/hub", "models--a--x", "snapshots")]);
  });
});

describe("models: a walk its deadline cut short says so", () => {
  // The log said what the deadline left out only when whole repos were left after it: one cut
  // short in its snapshots (the last repo, or the only one) lost models without a word, and a
  // user asking why a cached model is missing from `models` found nothing in the log.
  test("a repo whose snapshots were left by the deadline is logged", async () => {
    const readdir = (folder: string) => {
      if (folder === "/dead/hub-cut") return Promise.resolve(["models--a--x"]);
      if (folder.endsWith("snapshots")) return Promise.resolve(["c1", "c2"]);
      return Promise.reject(new Error("ENOENT")); // no refs
    };
    const snapshotFiles = (snapshot: string) =>
      snapshot.endsWith("c1") ? new Promise<string[]>(() => {}) : Promise.resolve(["m.gguf"]);
    const lines: string[] = [];
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      // Each listing's own wait (5 ms) is past the walk's (1 ms): the deadline ends c1's walk.
      const reads = { drives: answering(5), readdir, snapshotFiles, walkWaitMs: 1 };
      expect(await cachedCandidates("/dead/hub-cut", reads)).toEqual([]);
    } finally {
      warn.mockRestore();
    }
    expect(lines).toEqual([expect.stringContaining("1 repo left out or cut short")]);
  });
});

describe("models: a listing still hung is not started again", () => {
  // Its wait over, the next `models` (a host that retries) started the same folder's listing
  // again beside the hung one: each held another file thread, and once every lane held one, every
  // stat of the core was refused (models unreadable) for a single dead folder.
  test("a retry waits on the folder's listing still out, in one lane", async () => {
    const { drives, started, folderNames } = deadFolders(3);
    for (let i = 0; i < 3; i++)
      expect(await folderCandidates("/dead/retried", { drives, folderNames })).toEqual([]);
    expect(started).toEqual(["/dead/retried"]);
    expect(await drives.statOf("/alive/model.gguf")).not.toBe("late"); // two lanes still free
  });
});
