import { realpath, stat } from "node:fs/promises";
import * as nodePath from "node:path";
import { windowsDevicePath } from "../util/device-path.ts";
import { isFullPath, type PathRules } from "../util/full-path.ts";
import { isWithin, pathKey as key } from "../util/path-key.ts";
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
export async function refuseOwnFile(path: string, own: OwnFiles, how: OwnFileChecks = {}): Promise<void> {
  const rules = how.rules ?? nodePath;
  // Refused by its spelling in the read (document-file.ts), before any stat: on Windows a realpath
  // or a stat opens a device or pipe path (a pipe's server connected to, a COM port opened).
  if (!isFullPath(path, rules) || windowsDevicePath(path, rules)) return;
  const fs = how.fs ?? { realpath, stat };
  const real = (p: string) => fs.realpath(p).catch(() => rules.resolve(p));
  // The path as the OS resolves it; as written when it cannot be (missing: the read says why).
  const file = key(await real(path));
  const data = key(await real(own.dataDir));
  const under = isWithin(file, data, rules.sep);
  const config = own.configFile;
  const isConfig =
    config !== null && (file === key(await real(config)) || (await sameFile(fs.stat, path, config)));
  if (under || isConfig)
    throw documentProblem(
      "unreadable",
      `${path} is ${under ? "inside app.data_dir, the core's own files" : "the core's config file"}: not a document`,
      "path",
    );
}

/** Tests' stand-ins: Windows' path rules, the file system's answers. */
export interface OwnFileChecks {
  rules?: PathRules;
  fs?: { realpath: (p: string) => Promise<string>; stat: StatOf };
}

type StatOf = (p: string) => Promise<{ dev: number; ino: number }>;

async function sameFile(statOf: StatOf, a: string, b: string): Promise<boolean> {
  const [x, y] = await Promise.all([statOf(a).catch(() => null), statOf(b).catch(() => null)]);
  return x !== null && y !== null && x.dev === y.dev && x.ino === y.ino && x.ino !== 0;
}
