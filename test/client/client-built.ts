import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { buildClient, CLIENT_DIST } from "../../scripts/build-client.ts";

const ROOT = join(import.meta.dir, "../..");
/** What dist/client is made from: a change to any of them makes it stale. */
const INPUTS = [
  "src",
  "scripts/build-client.ts",
  "scripts/client-types.ts",
  "tsconfig.client.json",
  "package.json",
];

function newest(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let latest = st.mtimeMs;
  for (const name of readdirSync(path)) latest = Math.max(latest, newest(join(path, name)));
  return latest;
}

/**
 * dist/client as its sources are now. `npm test` builds it before the suite (build.ts), so the
 * files that test it read that build rather than each remove and rebuild it (three at once, in
 * parallel workers, each deleting what the others were reading); a single file run after an edit
 * rebuilds it. package.json is the build's last write.
 */
export async function clientBuilt(): Promise<string> {
  const mark = join(CLIENT_DIST, "package.json");
  const stale = !existsSync(mark) || newest(mark) < Math.max(...INPUTS.map((p) => newest(join(ROOT, p))));
  if (stale) await buildClient();
  return CLIENT_DIST;
}
