#!/usr/bin/env bun
/**
 * Compiles local-ai into one standalone executable per target in dist/.
 *   bun build.ts            every target
 *   bun build.ts --single   the host target only (tests and quick local builds)
 *   bun build.ts --release  also packages each target into dist/release/ with SHA256SUMS;
 *                           add --single for the host target only, and
 *                           --llama-server TARGET=PATH (repeatable) or --release-config FILE to
 *                           bundle llama-server for a target from a llama.cpp release archive,
 *                           an extracted release or build folder, or the executable itself
 *                           (scripts/release.ts; nothing is downloaded)
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import pkg from "./package.json" with { type: "json" };
import { buildClient } from "./scripts/build-client.ts";
import { compile, hostTarget, TARGETS, type Target } from "./scripts/compile.ts";
import { type LlamaServerFiles, llamaServerFiles } from "./scripts/llama-bundle.ts";
import {
  packageTarget,
  parseLlamaServers,
  releaseFiles,
  targetName,
  writeSha256Sums,
} from "./scripts/release.ts";

const DIST = join(import.meta.dir, "dist");

export function outfileFor(target: Target, host = false): string {
  const exe = target.os === "windows" ? ".exe" : "";
  // The host build also gets a plain name, so tests and docs can say dist/local-ai.
  return join(DIST, host ? `local-ai${exe}` : `local-ai-${target.os}-${target.arch}${exe}`);
}

export interface ReleaseOptions {
  /** Each target's llama-server, from prepareLlamaServers; a target without one ships without. */
  llamaServers: Map<string, LlamaServerFiles>;
  /** The compiled executable of a target (default: its file in dist/). */
  executableFor?: (target: Target) => string;
  /** Where the archives and SHA256SUMS go (default dist/release/, emptied first). */
  outDir?: string;
}

/**
 * Finds each target's llama-server in what the packager supplied (extracting archives into
 * `workDir`). Run before compiling: a wrong archive should not cost a full matrix build.
 */
export function prepareLlamaServers(
  targets: readonly Target[],
  sources: Map<string, string>,
  workDir: string,
): Map<string, LlamaServerFiles> {
  const prepared = new Map<string, LlamaServerFiles>();
  for (const target of targets) {
    const source = sources.get(targetName(target));
    if (source) prepared.set(targetName(target), llamaServerFiles(source, target, workDir));
  }
  return prepared;
}

/** Packages the compiled targets into archives with SHA256SUMS (see scripts/release.ts). */
export async function release(targets: readonly Target[], options: ReleaseOptions) {
  const outDir = options.outDir ?? join(DIST, "release");
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  const files = releaseFiles(import.meta.dir);
  const archives: string[] = [];
  for (const target of targets) {
    const llamaServer = options.llamaServers.get(targetName(target));
    const archive = await packageTarget({
      target,
      version: pkg.version,
      executable: options.executableFor?.(target) ?? outfileFor(target),
      files,
      llamaServer,
      outDir,
    });
    archives.push(archive);
    console.error(
      `packaged ${archive}${llamaServer ? "" : " without llama-server (its README.txt says how to add one)"}`,
    );
  }
  const sums = await writeSha256Sums(outDir, archives);
  rmSync(join(outDir, ".stage"), { recursive: true, force: true });
  console.error(`wrote ${sums}`);
  return { archives, sums };
}

async function main(argv: string[]): Promise<void> {
  const releasing = argv.includes("--release");
  const single = argv.includes("--single");
  // Checked before compiling: a typo in a path should not cost a full matrix build.
  const sources = parseLlamaServers(argv, TARGETS.map(targetName));
  if (sources.size > 0 && !releasing) throw new Error("--llama-server and --release-config need --release");
  if (releasing) releaseFiles(import.meta.dir);
  const targets = single ? [hostTarget()] : TARGETS;
  // A full build starts from an empty dist/; --single only replaces the host's files.
  if (!single) rmSync(DIST, { recursive: true, force: true });
  mkdirSync(DIST, { recursive: true });
  const work = join(DIST, ".llama-sources");
  try {
    const llamaServers = releasing ? prepareLlamaServers(targets, sources, work) : new Map();
    if (!single) for (const target of TARGETS) await compile(target, outfileFor(target));
    const host = hostTarget();
    await compile(host, outfileFor(host, true));
    // The typed host client (dist/client/) is small and quick; hosts and e2e tests import it.
    await buildClient();
    if (releasing) {
      await release(targets, {
        llamaServers,
        executableFor: single ? (t) => outfileFor(t, true) : undefined,
      });
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  try {
    await main(process.argv.slice(2));
  } catch (err) {
    console.error(`build.ts: ${(err as Error).message}`);
    process.exit(1);
  }
}
