import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "../fixtures/tmpdir.ts";

// npm 11.16+ reads package.json's "allowScripts" (advisory now, enforced by a later npm: see
// https://docs.npmjs.com/cli/v11/commands/npm-install-scripts); Bun reaches node_modules only
// through the `bun` package's install script.
const ROOT = join(import.meta.dir, "../..");
const REQUIRE_BUN = join(ROOT, "scripts/require-bun.sh");

function fakeProject(dir: string, bunScript: string): string {
  const bin = join(dir, "node_modules/.bin");
  mkdirSync(bin, { recursive: true });
  writeFileSync(join(bin, "bun"), bunScript);
  chmodSync(join(bin, "bun"), 0o755);
  return dir;
}

describe("installs that keep working", () => {
  test("every locked package with an install script is approved in allowScripts", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8"));
    const withScripts = Object.entries(lock.packages as Record<string, { hasInstallScript?: boolean }>)
      .filter(([path, entry]) => path !== "" && entry.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length));
    expect(withScripts).toContain("bun");
    for (const name of withScripts) expect(pkg.allowScripts?.[name]).toBe(true);
  });

  test("require-bun.sh passes a working bun and fails loudly on the stub an unrun install script leaves", async () => {
    await using ok = tmpdir();
    fakeProject(ok.path, "#!/bin/sh\necho 1.4.5\n");
    const pass = Bun.spawnSync([REQUIRE_BUN, ok.path], { stdout: "pipe", stderr: "pipe" });
    expect(pass.exitCode).toBe(0);
    expect(pass.stdout.toString()).toBe("bun 1.4.5\n");

    await using broken = tmpdir();
    // What `bun` is when its postinstall never ran: a placeholder that exits 1.
    fakeProject(broken.path, '#!/bin/sh\necho "Error: Bun\'s postinstall script was not run." >&2\nexit 1\n');
    const fail = Bun.spawnSync([REQUIRE_BUN, broken.path], { stdout: "pipe", stderr: "pipe" });
    expect(fail.exitCode).toBe(1);
    expect(fail.stderr.toString()).toContain('"allowScripts" must approve "bun"');

    await using none = tmpdir();
    expect(Bun.spawnSync([REQUIRE_BUN, none.path], { stderr: "pipe" }).exitCode).toBe(1);
  });

  test(".ci/run checks for bun right after npm ci", () => {
    const ci = readFileSync(join(ROOT, ".ci/run"), "utf8").split("\n");
    const install = ci.findIndex((l) => l.startsWith("npm ci "));
    expect(install).toBeGreaterThan(-1);
    expect(ci[install + 1]).toStartWith("scripts/require-bun.sh ||");
  });
});
