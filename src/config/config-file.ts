import { CoreError } from "../protocol/errors.ts";
import { FileTooLarge, NotRegularFile, readFailure, readSmallFileBytes } from "../util/read-file.ts";

/** Largest config file read (1 MiB): a real one is a few KiB; this bounds what a mistake costs. */
export const CONFIG_MAX_BYTES = 1024 * 1024;

/**
 * The config file's text: config_invalid naming the file when it is not a regular file of at
 * most CONFIG_MAX_BYTES, or not text this reads (decodeConfigText).
 */
export function readConfigFile(file: string): string {
  let bytes: Buffer;
  try {
    bytes = readSmallFileBytes(file, CONFIG_MAX_BYTES);
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
  return decodeConfigText(bytes, file);
}

/**
 * UTF-8 (a byte-order mark dropped), or UTF-16 with its byte-order mark, as YAML allows and as
 * Windows writes it (PowerShell 5.1's `>`, Notepad's "Unicode"): read as mojibake, such a file
 * was "not a mapping of sections". Bytes that are not UTF-8 are refused naming their line, never
 * made U+FFFD (a path `Jos\xe9` then named a file that is not there) (docs/bootstrap.md, "The config file").
 */
export function decodeConfigText(bytes: Uint8Array, file: string): string {
  const [a, b] = bytes;
  if (a === 0xff && b === 0xfe) return new TextDecoder("utf-16le").decode(bytes.subarray(2));
  if (a === 0xfe && b === 0xff) return new TextDecoder("utf-16be").decode(bytes.subarray(2));
  try {
    // ignoreBOM false (the default) drops a UTF-8 byte-order mark.
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    const line = lineOfFirstBadByte(bytes);
    throw new CoreError(
      "config_invalid",
      `${file} is not UTF-8 text (line ${line} holds bytes that are not): save it as UTF-8`,
      { file, line, key: null },
    );
  }
}

/** The 1-based line of the first byte that does not decode as UTF-8. */
function lineOfFirstBadByte(bytes: Uint8Array): number {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  const bad = text.indexOf("\uFFFD");
  const upTo = bad < 0 ? text : text.slice(0, bad);
  return upTo.split("\n").length;
}
