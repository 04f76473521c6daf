import { realpath, stat } from "node:fs/promises";
import { resolve, sep } from "node:path";
import { documentProblem } from "./refusal.ts";

/** The core's own places a document's path is compared with (the memory folders' walk leaves them out too). */
export interface OwnFiles {
  /** app.data_dir: every user's saved KV states' notes, 0.1 files, llama-server's logs. */
  dataDir: string;
  /** The config file: its secrets (MCP servers' env, tokens); null when the core runs without one. */
  configFile: string | null;
}

/**
 * Refuses a document path that is the config file or is under app.data_dir, as the OS resolves
 * it (links followed, its case on disk): added, another user's words or the config's secrets
 * would be a document of this user's, quoted into prompts (docs/agent.md "Documents"). The
 * config file is matched by its identity too (a hard link to it elsewhere). A link swapped in
 * after the check is not caught: the host names the path.
 */
export async function refuseOwnFile(path: string, own: OwnFiles): Promise<void> {
  const file = key(await real(path));
  const data = key(await real(own.dataDir));
  const under = file === data || file.startsWith(data.endsWith(sep) ? data : data + sep);
  const config = own.configFile;
  const isConfig = config !== null && (file === key(await real(config)) || (await sameFile(path, config)));
  if (under || isConfig)
    throw documentProblem(
      "unreadable",
      `${path} is ${under ? "inside app.data_dir, the core's own files" : "the core's config file"}: not a document`,
      "path",
    );
}

/** The path as the OS resolves it; as written when it cannot be (missing: the read says why). */
const real = (p: string) => realpath(p).catch(() => resolve(p));

async function sameFile(a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([stat(a).catch(() => null), stat(b).catch(() => null)]);
  return x !== null && y !== null && x.dev === y.dev && x.ino === y.ino && x.ino !== 0;
}

/** Paths without case on the systems whose file names usually have none. */
const key = (p: string) =>
  process.platform === "win32" || process.platform === "darwin" ? p.toLowerCase() : p;
