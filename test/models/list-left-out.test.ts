import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseConfigText } from "../../src/config/load.ts";
import { listModels } from "../../src/models/list.ts";
import { cachedCandidates, folderCandidates } from "../../src/models/list-candidates.ts";
import type { LeftOut } from "../../src/protocol/models.ts";
import { ModelsResultSchema } from "../../src/protocol/models.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ListingWhole } from "./listing-whole.ts";

// What the listing leaves out was said only in the log (or not at all): a host's model picker
// showed a shorter list and its user could not tell why a model was missing. The result's
// `left_out` says it (docs/models.md "What was left out"). Drives and the walk's deadline are
// stand-ins here: a share gone offline answers nothing (a stat that never settles, as an NFS
// client with its server gone), and the waits are a few milliseconds.

const probe = async () => cpuOnlyMachine({ ram: { total_bytes: 8 * GIB, available_bytes: 2 * GIB } });
const never = <T>() => new Promise<T>(() => {});
const answering = (waitMs = 5) =>
  new DriveAnswers({ stat: async () => ({ ino: 1 }), statWaitMs: waitMs, lanes: 8 });
const errno = (code: string) => Object.assign(new Error(code), { code });

describe("models: left_out says what the listing did not look at", () => {
  test("a cache folder whose drive did not answer (no word in the log before); the folder listed", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "near.gguf", tinyLlama());
    const cacheDir = join(dir.path, "hub-on-nas");
    const config = parseConfigText("model:\n  path: ./near.gguf\n", join(dir.path, "config.yaml")).config;
    const drives = new ListingWhole({
      stat: (p: string) => (p === cacheDir ? never() : Promise.resolve()),
      // The listing's own bound is this wait too: the near folder's real readdir must meet it.
      statWaitMs: 100,
      // A lane for the hung stat and others for the rest: with every lane held, every path is late.
      lanes: 4,
    });
    const result = await listModels({ config, configDir: dir.path, cacheDir }, { probe, drives });
    expect(result.models.map((m) => m.file)).toEqual(["near.gguf"]);
    expect(result.left_out).toEqual([{ path: cacheDir, reason: "no_answer" }]);
    expect(ModelsResultSchema.safeParse(result).success).toBe(true);
  });

  test("nothing left out: no left_out at all, as an older host knows the result", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "near.gguf", tinyLlama());
    const config = parseConfigText("model:\n  path: ./near.gguf\n", join(dir.path, "config.yaml")).config;
    const result = await listModels(
      { config, configDir: dir.path, cacheDir: join(dir.path, "no-cache-yet") },
      { probe, drives: new ListingWhole({ statWaitMs: 1000 }) },
    );
    expect(result.models.map((m) => m.file)).toEqual(["near.gguf"]);
    expect("left_out" in result).toBe(false);
  });

  test("a folder that cannot be read is unreadable, one that never answers no_answer, one not there nothing", async () => {
    const leftOut: LeftOut[] = [];
    const folderNames = (folder: string) =>
      folder.endsWith("locked")
        ? Promise.reject(errno("EACCES"))
        : folder.endsWith("gone")
          ? Promise.reject(errno("ENOENT"))
          : never<{ names: string[]; undecodable: Set<string> }>();
    const reads = { drives: answering(1), folderNames, leftOut };
    for (const f of ["/lo/locked", "/lo/gone", "/lo/hung"])
      expect(await folderCandidates(f, reads)).toEqual([]);
    expect(leftOut).toEqual([
      { path: "/lo/locked", reason: "unreadable" },
      { path: "/lo/hung", reason: "no_answer" },
    ]);
  });

  test("the hub cache: a dead repo, a snapshot that hangs, an unreadable snapshots folder", async () => {
    const leftOut: LeftOut[] = [];
    const hub = "/lo-hub";
    const readdir = (folder: string): Promise<string[]> => {
      if (folder === hub) return Promise.resolve(["models--a--dead", "models--b--hung", "models--c--locked"]);
      if (folder === join(hub, "models--b--hung", "snapshots")) return Promise.resolve(["c1", "c2"]);
      if (folder === join(hub, "models--c--locked", "snapshots")) return Promise.reject(errno("EACCES"));
      return Promise.reject(errno("ENOENT")); // no refs
    };
    const snapshotFiles = (snapshot: string) =>
      snapshot.endsWith("c1") ? never<string[]>() : Promise.resolve(["m.gguf"]);
    const drives = new DriveAnswers({
      stat: (p: string) => (p.endsWith("models--a--dead") ? never() : Promise.resolve({ ino: 1 })),
      statWaitMs: 1,
      lanes: 8,
    });
    const found = await cachedCandidates(hub, {
      drives,
      readdir,
      snapshotFiles,
      leftOut,
      walkWaitMs: 60_000,
    });
    expect(found.map((c) => `${c.repo}@${c.commit}`)).toEqual(["b/hung@c2"]);
    expect(leftOut).toEqual([
      { path: join(hub, "models--a--dead"), reason: "no_answer" },
      { path: join(hub, "models--b--hung", "snapshots", "c1"), reason: "no_answer" },
      { path: join(hub, "models--c--locked", "snapshots"), reason: "unreadable" },
    ]);
  });

  test("the walk's deadline: each repo it left or cut short is said, and so is a cache root it cut", async () => {
    const leftOut: LeftOut[] = [];
    const readdir = (folder: string) =>
      folder === "/lo-deadline" ? Promise.resolve(["models--a--x", "models--b--y"]) : never<string[]>();
    // Each listing's own wait (50 ms) is past the walk's (1 ms): only the deadline ends it.
    const reads = { drives: answering(50), readdir, leftOut, walkWaitMs: 1 };
    expect(await cachedCandidates("/lo-deadline", reads)).toEqual([]);
    expect(leftOut).toEqual([
      { path: join("/lo-deadline", "models--a--x"), reason: "deadline" },
      { path: join("/lo-deadline", "models--b--y"), reason: "deadline" },
    ]);
    const rootCut: LeftOut[] = [];
    const hangs = {
      drives: answering(50),
      readdir: () => never<string[]>(),
      leftOut: rootCut,
      walkWaitMs: 1,
    };
    expect(await cachedCandidates("/lo-deadline-root", hangs)).toEqual([]);
    expect(rootCut).toEqual([{ path: "/lo-deadline-root", reason: "deadline" }]);
  });
});
