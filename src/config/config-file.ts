import { CoreError } from "../protocol/errors.ts";
import { FileTooLarge, NotRegularFile, readFailure, readSmallFile } from "../util/read-file.ts";

/** Largest config file read (1 MiB): a real one is a few KiB; this bounds what a mistake costs. */
export const CONFIG_MAX_BYTES = 1024 * 1024;

/** The config file's text: config_invalid naming the file when it is not a regular file of at most CONFIG_MAX_BYTES. */
export function readConfigFile(file: string): string {
  try {
    return readSmallFile(file, CONFIG_MAX_BYTES);
  } catch (err) {
    const message =
      err instanceof NotRegularFile
        ? err.kind === "a directory"
          ? `${file} is a directory, not a config file`
          : `${file} is not a regular file (${err.kind})`
        : err instanceof FileTooLarge
          ? `${file} is ${err.bytes} bytes, over the limit of ${CONFIG_MAX_BYTES} bytes for a config file`
          : `cannot read ${file}: ${readFailure(err)}`;
    throw new CoreError("config_invalid", message, { file, line: null, key: null });
  }
}
