#!/usr/bin/env bun
/**
 * Builds the typed host client into dist/client/: index.mjs (ESM) and index.cjs (CommonJS, for
 * Electron main processes that still use require), .d.ts files under types/, and a package.json
 * so a host can `npm install path/to/dist/client` or copy the folder. The package has no
 * "type": "module", so its one set of .d.ts files reads as CommonJS, which TypeScript lets both
 * require() and import hosts use (ESM-typed declarations would refuse CommonJS hosts). Node APIs only, no zod at
 * run time: the bundle is small and needs neither Bun nor node_modules.
 */
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../package.json" with { type: "json" };
import { writeClientTypes } from "./client-types.ts";

const ROOT = join(import.meta.dir, "..");
export const CLIENT_DIST = join(ROOT, "dist/client");

export async function buildClient(): Promise<void> {
  const started = performance.now();
  // The plain protocol types first: the declarations below are emitted from them.
  writeClientTypes();

  rmSync(CLIENT_DIST, { recursive: true, force: true });
  for (const [format, naming] of [
    ["esm", "index.mjs"],
    ["cjs", "index.cjs"],
  ] as const) {
    const result = await Bun.build({
      entrypoints: [join(ROOT, "src/client/index.ts")],
      outdir: CLIENT_DIST,
      naming,
      target: "node",
      format,
      sourcemap: "linked",
    });
    if (!result.success) {
      for (const log of result.logs) console.error(log);
      throw new Error(`client build (${format}) failed`);
    }
  }

  const tsc = Bun.spawnSync([join(ROOT, "node_modules/.bin/tsc"), "-p", join(ROOT, "tsconfig.client.json")], {
    cwd: ROOT,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (tsc.exitCode !== 0) throw new Error(`client declarations failed:\n${tsc.stdout}${tsc.stderr}`);
  // Declarations keep the sources' ".ts" specifiers; ".js" resolves to the .d.ts beside it under
  // every moduleResolution a host may use.
  for (const file of walk(join(CLIENT_DIST, "types"))) {
    if (!file.endsWith(".d.ts")) continue;
    const dts = readFileSync(file, "utf8");
    writeFileSync(file, dts.replace(/(from\s+["'])(\.{1,2}\/[^"']+)\.ts(["'])/g, "$1$2.js$3"));
  }

  writeFileSync(
    join(CLIENT_DIST, "package.json"),
    `${JSON.stringify(
      {
        name: "@local-ai/client",
        version: pkg.version,
        description: "Typed host client for the local-ai core (Node >= 18, Electron main process)",
        main: "./index.cjs",
        module: "./index.mjs",
        types: "./types/client/index.d.ts",
        exports: {
          ".": { types: "./types/client/index.d.ts", import: "./index.mjs", require: "./index.cjs" },
        },
        engines: { node: ">=18" },
      },
      null,
      2,
    )}\n`,
  );
  const kb = (statSync(join(CLIENT_DIST, "index.mjs")).size / 1024).toFixed(1);
  console.error(
    `built ${CLIENT_DIST} (index.mjs ${kb} KiB) in ${Math.round(performance.now() - started)} ms`,
  );
}

function* walk(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else yield path;
  }
}

if (import.meta.main) await buildClient();
