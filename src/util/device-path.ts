import * as nodePath from "node:path";
import type { PathRules } from "./full-path.ts";

/**
 * The names Windows maps to a device in any folder, with or without an extension or a stream
 * (`NUL`, `nul.gguf`, `COM1:`), trailing dots and spaces ignored as Windows ignores them.
 */
const RESERVED = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)$/i;

/**
 * Why `path` names a Windows device, pipe or mailslot rather than a file, or null (always null
 * where the rules are not Windows'). A stat or an open of such a path reaches the device: a
 * named pipe's server is connected to (and takes the pipe's one instance), a COM port opened, a
 * console read. So a path a host or a config gives is refused before either, by its spelling:
 * - the device namespace, `\\.\…` and `\\?\…` but for `\\?\C:\…`, `\\?\UNC\…` and
 *   `\\?\Volume{…}\…` (long spellings of a file), and the NT `\??\…`;
 * - a share named `pipe` or `mailslot` (`\\server\pipe\x` is a named pipe, local or remote);
 * - a reserved device name as any part of it (`C:\models\NUL.gguf`, `COM1`), but under `\\?\`,
 *   where Windows takes each name as written.
 * `/` is Windows' `\` here, as it is to Windows.
 */
export function windowsDevicePath(path: string, rules: PathRules = nodePath): string | null {
  if (rules.sep !== "\\") return null;
  const p = path.replaceAll("/", "\\");
  const long = /^\\\\\?\\(?:[A-Za-z]:(?:\\|$)|UNC\\|Volume\{[0-9A-Fa-f-]+\}(?:\\|$))/i.test(p);
  if (!long && /^(?:\\\\[.?]|\\\?\?)(?:\\|$)/.test(p))
    return "names a device or pipe in Windows' device namespace (\\\\.\\…, \\\\?\\…), not a file";
  const share = /^\\\\(?:\?\\UNC\\)?[^\\]+\\([^\\]+)/i.exec(p)?.[1];
  if (share && /^(?:pipe|mailslot)$/i.test(share))
    return `names a Windows ${share.toLowerCase() === "pipe" ? "named pipe" : "mailslot"}, not a file`;
  if (long) return null;
  const device = p
    .replace(/^[A-Za-z]:/, "")
    .split("\\")
    .find((part) => RESERVED.test(part.replace(/[.:].*$/s, "").replace(/[ .]+$/, "")));
  return device === undefined
    ? null
    : `names the Windows device ${device.replace(/[.:].*$/s, "").trim()}, not a file`;
}
