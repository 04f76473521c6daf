import { describe, expect, test } from "bun:test";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, isAbsolute, join, resolve, win32 } from "node:path";
import { coreBinaryCandidates, LocalAiError, resolveCoreBinary } from "../../src/client/index.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * resolveCoreBinary against the layouts each packager writes, built from the recipes in
 * docs/bootstrap.md (read from the file, so the docs and this test cannot drift apart):
 *
 * - electron-builder: `extraResources` "copy the file or directory with matching names directly
 *   into the app's resources directory (Contents/Resources for MacOS, resources for Linux and
 *   Windows)"; `from`/`to` as for files; file macros: "${arch} — expanded to ia32, x64",
 *   "${os} — expanded to mac, linux or win according to target platform"
 *   (https://www.electron.build/contents, docs/file-patterns.md); per-platform keys mac, linux,
 *   win may set them ("Overridable per Platform Options", electron.build/configuration).
 *   Unpacked output dirs: dist/mac-<arch>/<App>.app, dist/linux-unpacked, dist/win-unpacked.
 * - electron-forge / @electron/packager: `extraResource` is "one or more files to be copied
 *   directly into the app's Contents/Resources directory for macOS target platforms, and the
 *   resources directory for other target platforms"; packager copies each with
 *   `fs.promises.cp(resource, join(resourcesDir, basename(resource)), { recursive: true })`
 *   (src/platform.ts copyExtraResources). Forge hooks: `prePackage(config, platform, arch)`
 *   (https://www.electronforge.io/config/hooks).
 * - asar: files unpacked from app.asar live in app.asar.unpacked beside it, same relative paths
 *   (electron-builder `asarUnpack`, "Whether to automatically unpack executables files"
 *   `smartUnpack`, default true).
 */
const DOCS = readFileSync(join(import.meta.dir, "../../docs/bootstrap.md"), "utf8");

/** The fenced block right after `<!-- recipe:NAME -->` in docs/bootstrap.md. */
function recipe(name: string): string {
  const at = DOCS.indexOf(`<!-- recipe:${name} -->`);
  expect(at).toBeGreaterThan(-1);
  const block = /```\w*\n([\s\S]*?)```/.exec(DOCS.slice(at));
  return block![1]!;
}

const TARGETS = [
  { platform: "darwin", arch: "x64" },
  { platform: "darwin", arch: "arm64" },
  { platform: "linux", arch: "x64" },
  { platform: "linux", arch: "arm64" },
  { platform: "win32", arch: "x64" },
] as const;
const osName = (platform: string) => (platform === "win32" ? "windows" : platform);
const exeOf = (platform: string) => (platform === "win32" ? "local-ai.exe" : "local-ai");

/** A project with every target's bundle unpacked in vendor/local-ai/<os>-<arch>/. */
function project(root: string): string {
  for (const t of TARGETS) {
    const dir = join(root, "vendor/local-ai", `${osName(t.platform)}-${t.arch}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, exeOf(t.platform)), `core for ${t.platform}-${t.arch}`);
    if (t.platform === "linux") {
      writeFileSync(join(dir, "libllama.so.0.5.0"), "lib");
      symlinkSync("libllama.so.0.5.0", join(dir, "libllama.so.0"));
    }
  }
  writeFileSync(join(root, "package.json"), '{"name":"my-app","main":"main.js"}');
  return root;
}

/** Where each packager puts the resources directory of an unpacked build. */
function resourcesDir(out: string, platform: string, arch: string, packager: "builder" | "forge"): string {
  if (platform === "darwin") {
    const app = packager === "builder" ? `mac-${arch}/My App.app` : `My App-darwin-${arch}/My App.app`;
    return join(out, app, "Contents/Resources");
  }
  if (packager === "forge") return join(out, `My App-${platform}-${arch}`, "resources");
  return join(out, platform === "win32" ? "win-unpacked" : "linux-unpacked", "resources");
}

/** electron-builder's extraResources for one target: platform keys, macros, from → to. */
function electronBuilder(root: string, config: any, platform: string, arch: string, out: string): string {
  const key = { darwin: "mac", linux: "linux", win32: "win" }[platform]!;
  const os = key;
  const resources = resourcesDir(out, platform, arch, "builder");
  mkdirSync(resources, { recursive: true });
  writeFileSync(join(resources, "app.asar"), "asar");
  const sets = [...(config.extraResources ?? []), ...(config[key]?.extraResources ?? [])];
  for (const set of sets) {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: electron-builder's own macro syntax
    const expand = (p: string) => p.replaceAll("${arch}", arch).replaceAll("${os}", os);
    cpSync(join(root, expand(set.from)), join(resources, expand(set.to ?? set.from)), {
      recursive: true,
      verbatimSymlinks: true,
    });
  }
  return resources;
}

describe("resolveCoreBinary", () => {
  test("electron-builder, the docs' recipe: <resources>/local-ai/ on every target", async () => {
    await using dir = tmpdir();
    const root = project(join(dir.path, "app"));
    const config = JSON.parse(recipe("electron-builder"));
    // Every target's binaries stay out of app.asar.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: electron-builder's own macro syntax
    expect(config.files).toContain("!vendor${/*}");
    for (const t of TARGETS) {
      const resources = electronBuilder(root, config, t.platform, t.arch, join(dir.path, "dist"));
      const binary = resolveCoreBinary({ resourcesPath: resources, ...t });
      expect(binary).toBe(join(resources, "local-ai", exeOf(t.platform)));
      // The right target's build, not merely a file of that name.
      expect(readFileSync(binary, "utf8")).toBe(`core for ${t.platform}-${t.arch}`);
    }
  });

  test("electron-forge, the docs' recipe: prePackage stages build/local-ai, packager copies it by name", async () => {
    await using dir = tmpdir();
    const root = project(join(dir.path, "app"));
    // The recipe as written, loaded as the project's forge.config.js.
    writeFileSync(join(root, "forge.config.js"), recipe("electron-forge"));
    const forge = require(join(root, "forge.config.js"));
    for (const t of TARGETS) {
      await forge.hooks.prePackage(forge, t.platform, t.arch);
      const resources = resourcesDir(join(dir.path, "out"), t.platform, t.arch, "forge");
      mkdirSync(resources, { recursive: true });
      // @electron/packager's copyExtraResources.
      for (const resource of forge.packagerConfig.extraResource as string[])
        cpSync(resource, join(resources, basename(resource)), { recursive: true });
      const binary = resolveCoreBinary({ resourcesPath: resources, ...t });
      expect(binary).toBe(join(resources, "local-ai", exeOf(t.platform)));
      expect(readFileSync(binary, "utf8")).toBe(`core for ${t.platform}-${t.arch}`);
      if (t.platform === "linux") {
        // Staged dereferenced: no link into the build machine survives the packager's fs.cp.
        for (const name of readdirSync(join(resources, "local-ai")))
          expect(lstatSync(join(resources, "local-ai", name)).isSymbolicLink()).toBe(false);
      }
    }
    // The packager's ignore keeps vendor/ and build/ out of the app's files.
    const ignore = forge.packagerConfig.ignore as RegExp[];
    for (const p of ["/vendor", "/vendor/local-ai/linux-x64/local-ai", "/build/local-ai"])
      expect(ignore.some((r) => r.test(p))).toBe(true);
    expect(ignore.some((r) => r.test("/main.js"))).toBe(false);
  });

  test("forge's extraResource of the target folder itself: <resources>/<os>-<arch>/", async () => {
    await using dir = tmpdir();
    const root = project(join(dir.path, "app"));
    const resources = resourcesDir(join(dir.path, "out"), "win32", "x64", "forge");
    const resource = join(root, "vendor/local-ai/windows-x64");
    mkdirSync(resources, { recursive: true });
    cpSync(resource, join(resources, basename(resource)), { recursive: true });
    expect(resolveCoreBinary({ resourcesPath: resources, platform: "win32", arch: "x64" })).toBe(
      join(resources, "windows-x64", "local-ai.exe"),
    );
  });

  test("binaries unpacked from the asar: <resources>/app.asar.unpacked/vendor/local-ai/<os>-<arch>/", async () => {
    await using dir = tmpdir();
    const root = project(join(dir.path, "app"));
    const resources = resourcesDir(join(dir.path, "dist"), "darwin", "arm64", "builder");
    mkdirSync(resources, { recursive: true });
    writeFileSync(join(resources, "app.asar"), "asar");
    cpSync(join(root, "vendor"), join(resources, "app.asar.unpacked", "vendor"), { recursive: true });
    expect(resolveCoreBinary({ resourcesPath: resources, platform: "darwin", arch: "arm64" })).toBe(
      join(resources, "app.asar.unpacked/vendor/local-ai/darwin-arm64/local-ai"),
    );
  });

  test("development: <appPath>/vendor/local-ai/<os>-<arch>/, .exe on Windows", async () => {
    await using dir = tmpdir();
    const root = project(join(dir.path, "app"));
    // In development process.resourcesPath is Electron's own folder: it is not looked at.
    const electronDist = join(dir.path, "node_modules/electron/dist/resources");
    expect(
      resolveCoreBinary({
        dev: true,
        appPath: root,
        resourcesPath: electronDist,
        platform: "win32",
        arch: "x64",
      }),
    ).toBe(join(root, "vendor/local-ai/windows-x64/local-ai.exe"));
    expect(resolveCoreBinary({ dev: true, appPath: root, platform: "linux", arch: "arm64" })).toBe(
      join(root, "vendor/local-ai/linux-arm64/local-ai"),
    );
  });

  test("a relative appPath or resourcesPath gives an absolute path, the file it found", () => {
    // Spawn resolves a relative command against the client's `cwd` option, not the folder it was
    // found from: `vendor/…` with cwd set to the data folder ran <data>/vendor/…/local-ai, a file
    // whoever writes there controls (or failed ENOENT with the binary in place).
    const seen: string[] = [];
    const exists = (path: string) => {
      seen.push(path);
      return true;
    };
    const dev = resolveCoreBinary({ dev: true, appPath: "app", platform: "linux", arch: "x64", exists });
    expect(dev).toBe(resolve("app/vendor/local-ai/linux-x64/local-ai"));
    const packaged = resolveCoreBinary({ resourcesPath: "res", platform: "linux", arch: "x64", exists });
    expect(packaged).toBe(resolve("res/local-ai/local-ai"));
    for (const path of seen) expect(isAbsolute(path)).toBe(true);
    const candidates = coreBinaryCandidates({ resourcesPath: "res", platform: "linux", arch: "x64" });
    for (const c of candidates) expect(isAbsolute(c.path)).toBe(true);
  });

  // A Windows drive-relative path ("C:", "D:app") names the drive's current folder, which the
  // host's process does not show: joined, `appPath: "C:"` gave C:vendor\local-ai\…, run from
  // wherever that drive's working folder was. An absolute vendorDir was joined under the app's
  // folder without a word (`/opt/x` → <appPath>/opt/x/…): a host that passes one means that folder.
  test("a drive-relative appPath or resourcesPath, an absolute vendorDir: refused, naming the option", () => {
    const refusal = (options: Parameters<typeof resolveCoreBinary>[0]) => {
      const exists = () => true;
      for (const call of [
        () => resolveCoreBinary({ ...options, exists }),
        () => coreBinaryCandidates(options),
      ]) {
        let err: unknown;
        try {
          call();
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(LocalAiError);
        expect((err as LocalAiError).code).toBe("invalid_request");
        const field = (err as LocalAiError<"invalid_request">).data?.field;
        expect((err as Error).message).toContain(`option ${field} `);
      }
      return (coreBinaryCandidatesError(options) as LocalAiError<"invalid_request">).data?.field;
    };
    const win = { platform: "win32", arch: "x64" } as const;
    expect(refusal({ ...win, dev: true, appPath: "C:" })).toBe("appPath");
    expect(refusal({ ...win, dev: true, appPath: "d:app" })).toBe("appPath");
    expect(refusal({ ...win, resourcesPath: "C:resources" })).toBe("resourcesPath");
    for (const vendorDir of ["/opt/x", "C:\\x", "C:/x", "\\\\server\\share\\x", "C:x"])
      expect(refusal({ ...win, dev: true, appPath: "/app", vendorDir })).toBe("vendorDir");
    expect(refusal({ resourcesPath: "/res", platform: "linux", arch: "x64", vendorDir: "/opt/x" })).toBe(
      "vendorDir",
    );
    // Still served: a rooted drive path, a relative vendorDir, "." for the per-target folders
    // right in appPath (the way to name an absolute folder: appPath that folder).
    const ok = (options: Parameters<typeof resolveCoreBinary>[0]) =>
      resolveCoreBinary({ ...options, exists: () => true });
    expect(ok({ dev: true, appPath: "/opt/x", vendorDir: ".", platform: "linux", arch: "x64" })).toBe(
      "/opt/x/linux-x64/local-ai",
    );
    expect(ok({ dev: true, appPath: "/app", vendorDir: "bin/core", platform: "linux", arch: "x64" })).toBe(
      "/app/bin/core/linux-x64/local-ai",
    );
    expect(win32.isAbsolute("C:\\app")).toBe(true);
    expect(() => coreBinaryCandidates({ ...win, dev: true, appPath: "C:\\app" })).not.toThrow();
  });

  // A Linux or macOS folder may be named "C:x": the host's path module resolves it as any relative
  // name, and refusing it (as the drive-relative check did on every host) broke a working layout.
  // Refused only where Windows reads the path: a Windows host, or platform "win32" given.
  test.skipIf(process.platform === "win32")(
    "a folder named like a drive on Linux, for Linux: served as the relative folder it is",
    () => {
      const linux = { platform: "linux", arch: "x64", exists: () => true } as const;
      expect(resolveCoreBinary({ ...linux, dev: true, appPath: "C:x" })).toBe(
        resolve("C:x/vendor/local-ai/linux-x64/local-ai"),
      );
      expect(resolveCoreBinary({ ...linux, resourcesPath: "D:res" })).toBe(
        resolve("D:res/local-ai/local-ai"),
      );
      expect(resolveCoreBinary({ ...linux, dev: true, appPath: "/app", vendorDir: "C:x" })).toBe(
        "/app/C:x/linux-x64/local-ai",
      );
      // Still refused on Linux: an absolute vendorDir is one there too.
      expect(() => resolveCoreBinary({ ...linux, dev: true, appPath: "/app", vendorDir: "/opt/x" })).toThrow(
        LocalAiError,
      );
    },
  );

  test("nothing there: the error names the target and every path tried", async () => {
    await using dir = tmpdir();
    const resources = join(dir.path, "resources");
    const candidates = coreBinaryCandidates({ resourcesPath: resources, platform: "linux", arch: "x64" });
    expect(candidates.map((c) => c.layout)).toEqual(["resources", "resources-target", "asar-unpacked"]);
    let thrown: unknown;
    try {
      resolveCoreBinary({ resourcesPath: resources, platform: "linux", arch: "x64" });
    } catch (err) {
      thrown = err;
    }
    // A LocalAiError, as its refusals of an option are (before: a plain Error, so a host that
    // switched on `code` for them fell through here); `data.tried` lists the paths, as the core's
    // binary_missing does for llama-server.
    expect(thrown).toBeInstanceOf(LocalAiError);
    const missing = thrown as LocalAiError<"binary_missing">;
    expect(missing.code).toBe("binary_missing");
    expect(missing.data?.tried).toEqual(candidates.map((c) => c.path));
    expect(missing.message).toContain("local-ai for linux-x64 not found");
    for (const c of candidates) expect(missing.message).toContain(c.path);
    expect(() => resolveCoreBinary({ platform: "linux", arch: "x64" })).toThrow(/pass resourcesPath/);
    const unset = coreBinaryCandidatesError(() => resolveCoreBinary({ platform: "linux", arch: "x64" }));
    expect(unset).toBeInstanceOf(LocalAiError);
    expect((unset as LocalAiError<"invalid_request">).code).toBe("invalid_request");
    expect((unset as LocalAiError<"invalid_request">).data?.field).toBe("resourcesPath");
    expect(existsSync(resources)).toBe(false);
  });
});

function coreBinaryCandidatesError(
  options: Parameters<typeof coreBinaryCandidates>[0] | (() => unknown),
): unknown {
  try {
    if (typeof options === "function") options();
    else coreBinaryCandidates(options);
  } catch (err) {
    return err;
  }
  return undefined;
}
