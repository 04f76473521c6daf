import { join } from "node:path";
import pkg from "../package.json" with { type: "json" };

/*
 * The build targets and the compile of one, used by build.ts, the Windows suite's executables
 * (scripts/windows/build-exes.ts) and bench/baseline.ts, so none of them imports build.ts.
 */

/**
 * The shipped targets, named `<os>-<arch>` everywhere (archives, docs, the client's
 * resolveCoreBinary). x64 builds use Bun's `-baseline` runtimes: the default x64 runtime may
 * assume AVX2 (Haswell, 2013+) and die with "Illegal instruction" on older CPUs and on VMs with a
 * conservative CPU model, which an offline installer cannot rule out; baseline needs x86-64-v2
 * (SSE4.2, POPCNT). bench/baseline.ts measures what it costs (nothing measurable with Bun 1.4.5).
 */
export const TARGETS = [
  { os: "linux", arch: "x64", bun: "bun-linux-x64-baseline" },
  { os: "linux", arch: "arm64", bun: "bun-linux-arm64" },
  { os: "darwin", arch: "x64", bun: "bun-darwin-x64-baseline" },
  { os: "darwin", arch: "arm64", bun: "bun-darwin-arm64" },
  { os: "windows", arch: "x64", bun: "bun-windows-x64-baseline" },
] as const;
export type Target = (typeof TARGETS)[number];

export function hostTarget(): Target {
  const os = process.platform === "win32" ? "windows" : process.platform;
  const found = TARGETS.find((t) => t.os === os && t.arch === process.arch);
  if (!found) throw new Error(`no build target for ${process.platform}-${process.arch}`);
  return found;
}

/** Compiles src/index.ts into one executable for `target` (a TARGETS entry or a Bun target). */
export async function compile(target: { bun: string }, outfile: string): Promise<void> {
  const started = performance.now();
  let result: Bun.BuildOutput;
  try {
    result = await bundle(target.bun, outfile);
  } catch (err) {
    throw compileError(target.bun, err);
  }
  if (!result.success) throw compileError(target.bun, new AggregateError(result.logs, "build failed"));
  const ms = Math.round(performance.now() - started);
  console.error(`built ${outfile} (${target.bun}) in ${ms} ms`);
}

function bundle(bunTarget: string, outfile: string): Promise<Bun.BuildOutput> {
  return Bun.build({
    // The structured answer's validator runs on a worker thread of its own (src/agent/validator-thread.ts).
    entrypoints: [
      join(import.meta.dir, "..", "src/index.ts"),
      join(import.meta.dir, "..", "src/agent/validator-worker.ts"),
      // A document's chunks are written on one too (src/store/chunk-thread.ts).
      join(import.meta.dir, "..", "src/store/chunk-worker.ts"),
      // And a PDF is read by pdf.js on one of its own (src/documents/pdf-pages.ts).
      join(import.meta.dir, "..", "src/documents/pdf-worker.ts"),
    ],
    compile: {
      target: bunTarget as never,
      outfile,
      // Windows keeps the console subsystem so `local-ai doctor` prints in a terminal; GUI hosts
      // spawn it with windowsHide (docs/bootstrap.md).
    },
    minify: true,
    // Precompiled bytecode roughly halves start-up; Bun requires CommonJS output for it.
    bytecode: true,
    format: "cjs",
    sourcemap: "linked",
    define: { LOCAL_AI_VERSION: JSON.stringify(pkg.version) },
  });
}

/**
 * What a failed compile says. A cross-target's runtime is fetched by Bun on first use; when that
 * fails the build stops here: it never falls back to another runtime (an x64 build without
 * `-baseline` would ship, silently, a core that may not start on older CPUs).
 */
export function compileError(bunTarget: string, err: unknown): Error {
  const causes =
    err instanceof AggregateError && err.errors.length > 0
      ? err.errors.map((e) => String((e as { message?: unknown })?.message ?? e))
      : [String((err as { message?: unknown })?.message ?? err)];
  let text = `cannot build for ${bunTarget}: ${causes.join("; ")}`;
  if (causes.some((c) => /download|fetch|connect|network|registry/i.test(c))) {
    text +=
      `\n  Bun downloads the ${bunTarget} runtime from the npm registry on first use and keeps it in` +
      " its install cache (~/.bun/install/cache, or $BUN_INSTALL_CACHE_DIR). Build once where the" +
      " registry is reachable, or copy that cache from a machine that has it. No other runtime is" +
      " used in its place.";
  }
  return new Error(text);
}
