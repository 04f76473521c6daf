import type { PathsObservation } from "../../test/windows/observations.ts";
import { type Check, check } from "./checks.ts";

type Answer = PathsObservation["document"];

/**
 * An error with this code naming this key or field (the protocol's error line: code and data at
 * its top), refused by the name's spelling ("names a device or pipe", "names the Windows device
 * NUL"), not by a stat or an open that found nothing there.
 */
function refusal(id: string, what: string, m: Answer, code: string, key: string): Check {
  const named = m?.code === code && (m?.data?.key ?? m?.data?.field) === key;
  return check(id, what, named && /\bdevice\b/.test(String(m?.message ?? "")), m);
}

/** The paths scenario: one folder spelled two ways listed once; a pipe's or a device's path refused by its name. */
export function judgePaths(o: PathsObservation): Check[] {
  const folders = Array.isArray(o.folders) ? o.folders : [];
  const pipe = "\\\\.\\pipe\\…";
  return [
    check(
      "paths.one_folder",
      "the config's folder and model.path's, spelled apart (case, /, .\\), are one `folders` entry",
      folders.length === 1 && String(folders[0]).toLowerCase() === o.dir.toLowerCase(),
      o.folders,
    ),
    refusal(
      "paths.pipe_config",
      `a config whose model.path is ${pipe} is config_invalid naming model.path, by its spelling`,
      o.pipeConfig,
      "config_invalid",
      "model.path",
    ),
    refusal(
      "paths.nul_config",
      "a config whose model.path is C:\\x\\NUL.gguf is config_invalid naming model.path, by its spelling",
      o.nulConfig,
      "config_invalid",
      "model.path",
    ),
    refusal(
      "paths.pipe_document",
      `documents.add of ${pipe} is invalid_request naming path, by its spelling`,
      o.document,
      "invalid_request",
      "path",
    ),
    refusal(
      "paths.pipe_export",
      `sessions.export to ${pipe} is invalid_request naming path, by its spelling`,
      o.exported,
      "invalid_request",
      "path",
    ),
    check(
      "paths.exit",
      "each of the scenario's four cores shuts down and exits 0",
      JSON.stringify(o.exitCodes) === "[0,0,0,0]",
      o.exitCodes,
    ),
  ];
}
