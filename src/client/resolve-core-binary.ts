import { existsSync } from "node:fs";
import { join, posix, resolve, win32 } from "node:path";
import { targetName } from "../util/target-name.ts";
import { LocalAiError } from "./errors.ts";

/**
 * Where the local-ai executable is in a host application, packaged or in development. One naming
 * scheme everywhere (release archives, docs/bootstrap.md, this helper): `<os>-<arch>` with os
 * darwin, linux or windows. The layouts, as the packagers write them (test/client/
 * resolve-core-binary.test.ts builds each one from the docs' recipes):
 *
 *   packaged, electron-builder `extraResources` to "local-ai"  <resources>/local-ai/local-ai
 *   packaged, electron-forge `extraResource` of a "local-ai"   <resources>/local-ai/local-ai
 *     folder (packager keeps a folder's own name)
 *   packaged, forge `extraResource` of vendor/local-ai/<os>-<arch>  <resources>/<os>-<arch>/local-ai
 *   packaged, inside the app's files, unpacked from the asar   <resources>/app.asar.unpacked/vendor/local-ai/<os>-<arch>/local-ai
 *   development                                                <appPath>/vendor/local-ai/<os>-<arch>/local-ai
 *
 * <resources> is `process.resourcesPath` (Contents/Resources on macOS, resources/ elsewhere);
 * the executable is local-ai.exe on Windows. Paths come back absolute, resolved against this
 * process's working directory: a relative one would be run from the client's `cwd` instead.
 */

export interface ResolveCoreBinaryOptions {
  /** `process.resourcesPath` in a packaged Electron app. */
  resourcesPath?: string;
  /** The app's folder (`app.getAppPath()`); development looks under it. Default: the working directory. */
  appPath?: string;
  /** `process.platform` of the machine the core runs on (default: this one's). */
  platform?: string;
  /** `process.arch` (default: this one's). */
  arch?: string;
  /** True when not packaged (`!app.isPackaged`): look in `<appPath>/<vendorDir>/<os>-<arch>/`. */
  dev?: boolean;
  /**
   * Where the per-target folders live, relative to the app's folder (default "vendor/local-ai"):
   * an absolute one is refused; for a folder elsewhere, pass it as appPath with vendorDir ".".
   */
  vendorDir?: string;
  /** Test seam: whether a file exists (default fs.existsSync). */
  exists?: (path: string) => boolean;
}

export type CoreBinaryLayout = "resources" | "resources-target" | "asar-unpacked" | "dev";

export interface CoreBinaryCandidate {
  path: string;
  layout: CoreBinaryLayout;
}

/** `<os>-<arch>` for a Node platform and arch: win32 → windows. */
export const coreTargetName: (platform: string, arch: string) => string = targetName;

/** Every place the executable may be, in the order resolveCoreBinary tries them. */
export function coreBinaryCandidates(options: ResolveCoreBinaryOptions = {}): CoreBinaryCandidate[] {
  const platform = options.platform ?? process.platform;
  const target = coreTargetName(platform, options.arch ?? process.arch);
  const exe = platform === "win32" ? "local-ai.exe" : "local-ai";
  const vendor = options.vendorDir ?? join("vendor", "local-ai");
  const refused = refusedOption(options);
  if (refused) throw refused;
  // Absolute: spawn resolves a relative command against the client's `cwd` option, so a relative
  // appPath ran <cwd>/vendor/…, a file other than the one found (one in the data folder, say).
  if (options.dev) {
    return [{ path: resolve(join(options.appPath ?? process.cwd(), vendor, target, exe)), layout: "dev" }];
  }
  const resources = options.resourcesPath && resolve(options.resourcesPath);
  if (!resources) return [];
  return [
    { path: join(resources, "local-ai", exe), layout: "resources" },
    { path: join(resources, target, exe), layout: "resources-target" },
    { path: join(resources, "app.asar.unpacked", vendor, target, exe), layout: "asar-unpacked" },
  ];
}

/**
 * A path option that cannot mean what the host meant, as the client's own options are refused
 * (`invalid_request`, `data.field` naming it; docs/bootstrap.md). A drive-relative appPath or
 * resourcesPath ("C:", "D:app") is the drive's current folder, which the host does not see:
 * `appPath: "C:"` ran C:vendor\local-ai\…. An absolute vendorDir ("/opt/x", "C:\\x") was
 * joined under the app's folder without a word; it means a folder the layouts do not have.
 */
function refusedOption(options: ResolveCoreBinaryOptions): LocalAiError | undefined {
  // Drive forms only where Windows reads the path: on Linux or macOS "C:x" is a folder's name,
  // resolved as any relative one. platform "win32" on another host: paths meant for Windows.
  const windows = process.platform === "win32" || options.platform === "win32";
  for (const field of ["appPath", "resourcesPath"] as const) {
    const value = options[field];
    if (windows && typeof value === "string" && driveRelative(value))
      return invalid(
        field,
        `${JSON.stringify(value)} is relative to the drive's current folder; give the full path (C:\\app)`,
      );
  }
  const vendor = options.vendorDir;
  if (
    typeof vendor === "string" &&
    (posix.isAbsolute(vendor) || (windows && (win32.isAbsolute(vendor) || /^[A-Za-z]:/.test(vendor))))
  )
    return invalid(
      "vendorDir",
      `${JSON.stringify(vendor)} must be relative to the app's folder; for a folder elsewhere pass it as appPath with vendorDir "."`,
    );
  return undefined;
}

/** "C:" or "C:app": a drive letter not followed by a separator. */
const driveRelative = (path: string) => /^[A-Za-z]:(?![\\/])/.test(path);

function invalid(field: string, why: string): LocalAiError<"invalid_request"> {
  return new LocalAiError("invalid_request", `resolveCoreBinary: the option ${field} ${why}`, { field });
}

/**
 * The path of the local-ai executable for this app; throws a LocalAiError `binary_missing`
 * naming every place tried (`data.tried`), or `invalid_request` with neither resourcesPath nor
 * dev or for a path option refused (refusedOption). Pass it as `binary` to LocalAiClient.start().
 */
export function resolveCoreBinary(options: ResolveCoreBinaryOptions = {}): string {
  const exists = options.exists ?? existsSync;
  const candidates = coreBinaryCandidates(options);
  const found = candidates.find((c) => exists(c.path));
  if (found) return found.path;
  const target = coreTargetName(options.platform ?? process.platform, options.arch ?? process.arch);
  // LocalAiErrors, as its refusals of an option are: a host switches on `code` for all of them.
  if (candidates.length === 0) {
    throw new LocalAiError(
      "invalid_request",
      "resolveCoreBinary: pass resourcesPath (process.resourcesPath) when packaged, or dev: true",
      { field: "resourcesPath" },
    );
  }
  const tried = candidates.map((c) => c.path);
  throw new LocalAiError(
    "binary_missing",
    `local-ai for ${target} not found (tried ${tried.join(", ")}); ` +
      "see docs/bootstrap.md, Electron, for the layouts",
    { tried },
  );
}
