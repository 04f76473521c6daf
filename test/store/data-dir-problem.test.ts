import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isCoreError } from "../../src/protocol/errors.ts";
import { dataDirError, fileInTheWay, fsProblemText } from "../../src/store/data-dir-problem.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const errno = (code: string, path: string, syscall = "mkdir") =>
  Object.assign(new Error(`${code}: ${syscall} '${path}'`), { code, path, syscall });

describe("dataDirError (issue 10 item 17)", () => {
  test("a read-only folder under the data dir: the path and 'permission denied', code internal_error", () => {
    const err = dataDirError(errno("EACCES", "/srv/data/users/u1"), "/srv/data");
    expect(isCoreError(err)).toBe(true);
    expect(err?.code).toBe("internal_error");
    expect(err?.message).toContain("/srv/data (app.data_dir)");
    expect(err?.message).toContain("/srv/data/users/u1: permission denied (EACCES)");
    expect(err?.data).toEqual({
      key: "app.data_dir",
      path: "/srv/data",
      file: "/srv/data/users/u1",
      problem: "EACCES",
    });
  });

  test("a full disk says to free space, not to pick another folder the user can write", () => {
    for (const code of ["ENOSPC", "EDQUOT"]) {
      const err = dataDirError(errno(code, "/srv/data/kv/x.tmp", "write"), "/srv/data");
      expect(err?.message).toContain("free some disk space");
      expect(err?.message).not.toContain("a folder this user can write");
    }
  });

  test("a regular file in the way is named as such", () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "afile"), "x");
    const dataDir = join(dir.path, "afile", "data");
    expect(fileInTheWay(join(dataDir, "users"))).toBe(join(dir.path, "afile"));
    const err = dataDirError(errno("ENOTDIR", dataDir), dataDir);
    expect(err?.message).toContain(`${join(dir.path, "afile")} is a file, not a folder`);
  });

  test("anything else stays unexpected: errors outside the data dir, or without a path", () => {
    expect(dataDirError(errno("EACCES", "/srv/other/x"), "/srv/data")).toBeUndefined();
    expect(dataDirError(errno("EACCES", "/srv/data-old/x"), "/srv/data")).toBeUndefined();
    expect(dataDirError(new Error("boom"), "/srv/data")).toBeUndefined();
    expect(dataDirError(undefined, "/srv/data")).toBeUndefined();
  });

  test("problems in words, the code kept", () => {
    expect(fsProblemText("EROFS")).toBe("on a read-only file system (EROFS)");
    expect(fsProblemText("EWEIRD")).toBe("EWEIRD");
    using dir = tmpdir();
    mkdirSync(join(dir.path, "d"));
    expect(fileInTheWay(join(dir.path, "d", "missing"))).toBeUndefined();
  });
});

describe("a damaged data folder, as the store's every user meets it (hl4 corrupt.mjs)", () => {
  test("app.data_dir itself a file: the open names it as a chat does, not a raw EEXIST", () => {
    using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    writeFileSync(dataDir, "i am a file");
    const err = catching(() => Store.open(dataDir));
    expect(isCoreError(err)).toBe(true);
    expect(err).toMatchObject({ code: "internal_error", data: { key: "app.data_dir", path: dataDir } });
    expect((err as Error).message).toContain(`${dataDir} is a file, not a folder`);
  });

  test("local-ai.db a folder: said so, not SQLite's 'cannot open'", () => {
    using dir = tmpdir();
    mkdirSync(join(dir.path, "local-ai.db"), { recursive: true });
    const err = catching(() => Store.open(dir.path));
    expect(isCoreError(err)).toBe(true);
    expect(err).toMatchObject({ code: "internal_error", data: { key: "app.data_dir", problem: "EISDIR" } });
    expect((err as Error).message).toContain(`${join(dir.path, "local-ai.db")} is a folder, not a file`);
  });
});

function catching(work: () => unknown): unknown {
  try {
    work();
  } catch (err) {
    return err;
  }
  return undefined;
}
