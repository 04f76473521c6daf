import { describe, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { v01DataCheck } from "../../src/doctor/v01-check.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { checkById, coreWithConfig, doctorDeps } from "./helpers/config-core.ts";

// 0.1 let a user or session id through that the protocol now refuses (a Windows device name such
// as `nul`, docs/agent.md "Import of the 0.1 layout"): its folder is kept, never imported, and
// no users.delete or sessions.delete can name it, so its words outlived every erase unseen.
const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

function session(tree: string, user: string, id: string): void {
  mkdirSync(join(tree, user, "sessions", id), { recursive: true });
  writeFileSync(join(tree, user, "sessions", id, "history.json"), '{"version":1,"messages":[]}');
}

describe.skipIf(process.platform === "win32")("doctor: v01_data", () => {
  test("folders no erase can name are a warning naming them; named ones are not; nothing written", () => {
    using dir = tmpdir();
    session(join(dir.path, "users"), "nul", "s1");
    session(join(dir.path, "users"), "ann", "s1");
    session(join(dir.path, "imported-0.1", "users"), "bob", "con.txt");
    session(join(dir.path, "imported-0.1", "users"), "bob", "s2");
    const c = v01DataCheck(configAt(dir.path))!;
    expect(c).toMatchObject({ id: "v01_data", status: "warn", data: { unreachable: 2 } });
    expect(c.message).toContain(join(dir.path, "users", "nul"));
    expect(c.message).toContain(join(dir.path, "imported-0.1", "users", "bob", "sessions", "con.txt"));
    expect(c.message).not.toContain("ann");
    expect(c.fix).toContain(`rm -r ${join(dir.path, "users", "nul")}`);
    expect(readdirSync(join(dir.path, "users")).sort()).toEqual(["ann", "nul"]);
  });

  test("a name with a control character is shown without it, and given no command", () => {
    using dir = tmpdir();
    session(join(dir.path, "users"), "a\u001b[2Jb", "s1");
    const c = v01DataCheck(configAt(dir.path))!;
    expect(c.message).toContain("a?[2Jb");
    expect(c.message).not.toContain("\u001b");
    expect(c.fix).not.toContain("rm -r");
  });

  // The check runs on the core's loop (the `doctor` method): 500 users' 100,000 sessions held
  // ping half a second, all names read and sorted whatever their number.
  test("the names read are bounded, and a report past the bound says it is partial", () => {
    using dir = tmpdir();
    for (let i = 0; i < 30; i++) session(join(dir.path, "users"), "ann", `s${i}`);
    const whole = v01DataCheck(configAt(dir.path))!;
    expect(whole).toMatchObject({ status: "ok", data: { complete: true } });
    const cut = v01DataCheck(configAt(dir.path), 10)!;
    expect(cut).toMatchObject({ status: "ok", data: { complete: false } });
    expect(cut.message).toContain("only the first 10 folder names were checked");
  });

  test("0.1 data every erase reaches: ok; none at all: no check", () => {
    using dir = tmpdir();
    expect(v01DataCheck(configAt(dir.path))).toBeUndefined();
    session(join(dir.path, "imported-0.1", "users"), "ann", "s1");
    expect(v01DataCheck(configAt(dir.path))).toMatchObject({ status: "ok", data: { unreachable: 0 } });
  });
});

test.skipIf(process.platform === "win32")("doctor's report names 0.1 folders no erase reaches", async () => {
  using dir = tmpdir();
  const core = coreWithConfig(dir.path, "app:\n  data_dir: ./data\n");
  session(join(dir.path, "data", "users"), "aux", "s1");
  const r = await runDoctor(core, doctorDeps);
  expect(checkById(r, "v01_data")).toMatchObject({ status: "warn", data: { unreachable: 1 } });
});

// A `users/` the core cannot list (EACCES: another owner's, after a copy as root) read as "nothing
// there": the check said ok, and no one learned the 0.1 words in it were never looked at. Root
// lists any folder: the refusal is faked on the listing.
test("a 0.1 folder that cannot be listed is a warning naming it, not ok", () => {
  using dir = tmpdir();
  session(join(dir.path, "users"), "ann", "s1");
  const users = join(dir.path, "users");
  const realReaddir = fs.readdirSync;
  const readdir = spyOn(fs, "readdirSync").mockImplementation(((p: fs.PathLike, o?: unknown) => {
    if (p === users)
      throw Object.assign(new Error(`EACCES: permission denied, scandir '${users}'`), { code: "EACCES" });
    return realReaddir(p, o as never);
  }) as typeof fs.readdirSync);
  let c: ReturnType<typeof v01DataCheck>;
  try {
    c = v01DataCheck(configAt(dir.path));
  } finally {
    readdir.mockRestore();
  }
  expect(c).toMatchObject({ id: "v01_data", status: "warn", data: { complete: false } });
  expect(c?.message).toContain(`could not be listed: ${users} (EACCES)`);
});

// A folder whose name is not UTF-8 (0.1 on Linux took the bytes as they came) was listed as
// `a\uFFFDb`, a name no lstat finds, and skipped as not a folder: the check said ok while the
// folder's words were out of every erase's reach.
test.skipIf(process.platform !== "linux")(
  "a folder whose name is not UTF-8 is named, with no command",
  () => {
    using dir = tmpdir();
    const users = join(dir.path, "users");
    mkdirSync(users);
    const raw = Buffer.concat([Buffer.from(`${users}/a`), Buffer.from([0xff]), Buffer.from("b")]);
    mkdirSync(raw);
    session(users, "ann", "s1");
    mkdirSync(Buffer.concat([Buffer.from(`${users}/ann/sessions/s`), Buffer.from([0xfe])]));
    const c = v01DataCheck(configAt(dir.path))!;
    expect(c).toMatchObject({ id: "v01_data", status: "warn", data: { unreachable: 2 } });
    expect(c.message).toContain(join(users, "a\uFFFDb"));
    expect(c.message).toContain(join(users, "ann", "sessions", "s\uFFFD"));
    expect(c.fix).not.toContain("rm -r");
  },
);
