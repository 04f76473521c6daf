import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { HF_PREFIX, parseHfModelPath } from "../protocol/model-ref.ts";
import type { ModelEntry } from "../protocol/models.ts";
import { repoPaths } from "./hf-cache.ts";
import { groupGgufs, isGgufPath, isProjector, missingText } from "./pick-gguf.ts";
import { readRef, snapshotFiles } from "./resolve.ts";
import { type FolderNames, folderNames } from "./utf8-names.ts";

// The `models` listing's models found on disk, before their headers are read (list.ts).

/** A model found on disk, before its header is read. */
export interface Candidate {
  source: ModelEntry["source"];
  repo: string | null;
  commit: string | null;
  refs: string[];
  file: string;
  /** Absolute paths of the parts (pick-gguf.ts GgufGroup.parts). */
  parts: string[];
  missing: string[];
  /** The missing parts as the verdict names them, `…` where more are missing than named. */
  missingText: string;
  model_path: string;
  /** A part's name is not UTF-8 (utf8-names.ts): nothing can open it by the name shown. */
  undecodable?: boolean;
}

export function folderCandidates(folder: string): Candidate[] {
  let found: FolderNames;
  try {
    found = folderNames(folder);
  } catch {
    return [];
  }
  const names = found.names.filter((n) => isGgufPath(n) && !isProjector(n));
  return groupGgufs(names).map((g) => ({
    source: "folder" as const,
    repo: null,
    commit: null,
    refs: [],
    file: g.first,
    parts: g.parts.map((p) => join(folder, p)),
    missing: g.missing,
    missingText: missingText(g),
    model_path: join(folder, g.first),
    undecodable: g.parts.some((p) => found.undecodable.has(p)),
  }));
}

/** Every snapshot of every cached model repo; snapshots a ref points at come first. */
export function cachedCandidates(cacheDir: string): Candidate[] {
  let dirs: string[];
  try {
    dirs = readdirSync(cacheDir).filter((d) => d.startsWith("models--"));
  } catch {
    return [];
  }
  return dirs.sort().flatMap((dir) => {
    const repo = dir.slice("models--".length).split("--").join("/");
    const paths = repoPaths(cacheDir, repo);
    const refs = readRefs(paths.refs);
    let commits: string[];
    try {
      commits = readdirSync(paths.snapshots);
    } catch {
      return [];
    }
    const referenced = (c: string) => (refs.get(c)?.includes("main") ? 0 : refs.has(c) ? 1 : 2);
    commits.sort((a, b) => referenced(a) - referenced(b) || a.localeCompare(b));
    return commits.flatMap((commit) => {
      const snapshot = join(paths.snapshots, commit);
      const onRefs = refs.get(commit) ?? [];
      return groupGgufs(snapshotFiles(snapshot).filter((f) => !isProjector(f))).map((g) => ({
        source: "hf_cache" as const,
        repo,
        commit,
        refs: onRefs,
        file: g.first,
        parts: g.parts.map((p) => join(snapshot, ...p.split("/"))),
        missing: g.missing,
        missingText: missingText(g),
        model_path: referenceOf(repo, g.first, onRefs) ?? join(snapshot, ...g.first.split("/")),
      }));
    });
  });
}

/**
 * The `hf:` reference a request can load a file of main's snapshot by, or null: a folder no hub
 * repo is named by (`models--a--b--c`) or a file no reference can name (a control character) is
 * offered by its path, never as a reference every request would refuse.
 */
function referenceOf(repo: string, file: string, refs: readonly string[]): string | null {
  if (!refs.includes("main")) return null;
  const ref = `${HF_PREFIX}${repo}:${file}`;
  try {
    parseHfModelPath(ref);
    return ref;
  } catch {
    return null;
  }
}

/** commit → the refs (main, tags, refs/pr/1 as pr/1) that name it. */
function readRefs(refsDir: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const walk = (dir: string, prefix: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names.sort()) {
      const full = join(dir, name);
      try {
        if (statSync(full).isDirectory()) {
          if (depth < 4) walk(full, `${prefix}${name}/`, depth + 1);
          continue;
        }
        const commit = readRef(full);
        out.set(commit, [...(out.get(commit) ?? []), `${prefix}${name}`]);
      } catch {
        // an unreadable ref names nothing
      }
    }
  };
  walk(refsDir, "", 0);
  return out;
}
