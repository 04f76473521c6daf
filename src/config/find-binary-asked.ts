import type { Stats } from "node:fs";
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import { CoreError } from "../protocol/errors.ts";
import { type DriveAnswers, drives, whyLate } from "../util/drive-answers.ts";
import { candidatesOf, type FindBinaryEnv, findLlamaServer } from "./find-binary.ts";
import type { Config } from "./schema.ts";

/** findLlamaServer's answer; `late` says which place's drive did not answer, when none was found. */
export type FoundServer = { path: string } | { tried: string[]; late?: string };

/** Tests: the drives, the executable's place, the platform and PATH. */
export type AskedEnv = Pick<FindBinaryEnv, "execPath" | "platform" | "pathEnv">;

const realPlaces = (): AskedEnv => ({
  execPath: process.execPath,
  platform: process.platform,
  pathEnv: process.env.PATH,
});

/**
 * findLlamaServer for the core's loop: each place it looks is asked of its drive off the loop
 * first (util/drive-answers.ts), in its order, up to the first executable file, and what is
 * there read asynchronously. Its synchronous stats held the whole core (ping and cancel too)
 * at every start, plan and doctor while `llama.binary` or a PATH folder sat on a network share
 * gone offline. A place whose drive does not answer is not looked at, nor any after it (the
 * lookup would have stopped there, hung); the answer says so when nothing was found.
 */
export async function findLlamaServerAsked(
  config: Pick<Config, "llama">,
  drive: DriveAnswers = drives,
  places: AskedEnv = realPlaces(),
): Promise<FoundServer> {
  const seen = new Map<string, { file: boolean; exec: boolean }>();
  let late: string | undefined;
  for (const candidate of candidatesOf(config, places)) {
    const st = await drive.statOf(candidate);
    if (st === "late") {
      late = `${candidate}: ${whyLate(drive, candidate)}`;
      break;
    }
    const file = st?.isFile() ?? false;
    const exec = file && (await executable(candidate, st!, places.platform));
    seen.set(candidate, { file, exec });
    if (exec) break;
  }
  const found = findLlamaServer(config, {
    ...places,
    isFile: (p) => seen.get(p)?.file ?? false,
    isExecutable: (p) => seen.get(p)?.exec ?? false,
  });
  if (late === undefined || "path" in found) return found;
  // Those after the dead place were never looked at: listed as tried, binary_missing told the
  // user llama-server is not where it may well be.
  return { tried: found.tried.slice(0, seen.size + 1), late };
}

/** The llama-server that will run, when there is one; findLlamaServerAsked's. */
export async function llamaServerAsked(
  config: Pick<Config, "llama">,
  drive?: DriveAnswers,
  places?: AskedEnv,
): Promise<string | undefined> {
  const found = await findLlamaServerAsked(config, drive, places);
  return "path" in found ? found.path : undefined;
}

/** Whether this user may run it (find-binary.ts's realEnv, asynchronously). */
async function executable(path: string, st: Stats, platform: string): Promise<boolean> {
  if (platform === "win32") return true;
  try {
    await access(path, constants.X_OK);
    return (st.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** binary_missing for a lookup that found none: the places looked at, and a dead one named. */
export function binaryMissing(found: { tried: string[]; late?: string }): CoreError {
  const late = found.late ? `; not looked at from ${found.late}` : "";
  const tried = found.tried.join(", ") || "(nothing)";
  return new CoreError("binary_missing", `llama-server not found; tried: ${tried}${late}`, {
    tried: found.tried,
  });
}
