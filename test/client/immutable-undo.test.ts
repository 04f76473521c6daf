import { describe, expect, test } from "bun:test";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { canMakeImmutable } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const ROOT = join(import.meta.dir, "../..");
const can = canMakeImmutable("immutable-undo");

/** test/fixtures/immutable-probe.ts run as its own `bun test`: its command and options. */
const PROBE = [process.execPath, ["test", "./test/fixtures/immutable-probe.ts"]] as const;
const probeOptions = (marker: string, timeoutMs: number) => ({
  cwd: ROOT,
  env: { ...process.env, LOCAL_AI_PROBE_OUT: marker, LOCAL_AI_PROBE_TIMEOUT_MS: String(timeoutMs) },
});

/** The probe's folder, once its run ended: gone, or removable (no immutable file left in it). */
function removable(folder: string): boolean {
  if (!existsSync(folder)) return true;
  try {
    rmSync(folder, { recursive: true, force: true });
    return true;
  } catch {
    return false;
  }
}

// The tests that set chattr +i (error-data, *-kv-erase…) undid it in their own finally, which a
// timed-out or killed test never reaches: the file stayed immutable in /tmp, the preload's cleanup
// failed on it (EPERM) and left the other folders, and every later rm of /tmp failed on it.
describe.skipIf(!can)("a file made immutable by a test is undone however the test ends", () => {
  test("a test that times out: the preload undoes it and removes its folder", async () => {
    await using out = tmpdir();
    const marker = join(out.path, "folder");
    const run = spawnSync(...PROBE, { ...probeOptions(marker, 200), encoding: "utf8", timeout: 20_000 });
    expect(run.stderr).toContain("timed out");
    const folder = readFileSync(marker, "utf8");
    expect(removable(folder)).toBe(true);
    expect(existsSync(folder)).toBe(false);
  }, 30_000);

  test("a run killed outright (SIGKILL): the next canMakeImmutable undoes it", async () => {
    await using out = tmpdir();
    const marker = join(out.path, "folder");
    const child = spawn(...PROBE, { ...probeOptions(marker, 20_000), stdio: "ignore" });
    const ended = new Promise((done) => child.once("exit", done));
    for (let i = 0; i < 200 && !existsSync(marker); i++) await Bun.sleep(50);
    const folder = readFileSync(marker, "utf8");
    child.kill("SIGKILL");
    await ended;
    expect(canMakeImmutable("immutable-undo")).toBe(true);
    expect(removable(folder)).toBe(true);
  }, 30_000);

  test("a folder the preload cannot remove: the test's HOME is removed all the same", async () => {
    await using out = tmpdir();
    const marker = join(out.path, "left");
    const run = spawnSync(process.execPath, ["test", "./test/fixtures/home-probe.ts"], {
      ...probeOptions(marker, 0),
      encoding: "utf8",
      timeout: 20_000,
    });
    const { home, file } = JSON.parse(readFileSync(marker, "utf8")) as { home: string; file: string };
    spawnSync("chattr", ["-i", file]);
    rmSync(dirname(file), { recursive: true, force: true });
    expect(run.stderr).toContain("EPERM");
    expect(existsSync(home)).toBe(false);
  }, 30_000);
});
