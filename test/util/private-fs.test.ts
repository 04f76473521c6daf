import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  constants,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import {
  ensurePrivateDir,
  ensurePrivateTree,
  tookSome,
  writeAllSync,
  writePrivateFile,
} from "../../src/util/private-fs.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const posix = process.platform !== "win32";
const mode = (p: string) => statSync(p).mode & 0o777;

describe.skipIf(!posix)("the core's files and folders are never followed through a link", () => {
  test("a folder planted as a link to an outside folder is refused, the outside left as it was", () => {
    using dir = tmpdir();
    const outside = join(dir.path, "outside");
    mkdirSync(outside, { mode: 0o755 });
    chmodSync(outside, 0o755);
    const data = join(dir.path, "data");
    mkdirSync(data);
    symlinkSync(outside, join(data, "kv"));
    expect(() => ensurePrivateDir(join(data, "kv"))).toThrow(expect.objectContaining({ code: "ELOOP" }));
    expect(() => ensurePrivateTree(data, "kv", "deeper")).toThrow(expect.objectContaining({ code: "ELOOP" }));
    expect(mode(outside)).toBe(0o755);
    expect(() => statSync(join(outside, "deeper"))).toThrow();
  });

  test("data_dir itself may be a link: the folders inside it are made in its target", () => {
    using dir = tmpdir();
    const real = join(dir.path, "real");
    mkdirSync(real);
    symlinkSync(real, join(dir.path, "data"));
    ensurePrivateTree(join(dir.path, "data"), "run", "mcp");
    expect(mode(join(real, "run", "mcp"))).toBe(0o700);
  });

  test("a file planted as a link is not written, nor its target's mode changed", () => {
    using dir = tmpdir();
    const target = join(dir.path, "target");
    writeFileSync(target, "theirs");
    chmodSync(target, 0o644);
    symlinkSync(target, join(dir.path, "mine"));
    expect(() => writePrivateFile(join(dir.path, "mine"), "ours")).toThrow(
      expect.objectContaining({ code: "ELOOP" }),
    );
    expect(readFileSync(target, "utf8")).toBe("theirs");
    expect(mode(target)).toBe(0o644);
    writePrivateFile(join(dir.path, "fresh"), "ours");
    expect(mode(join(dir.path, "fresh"))).toBe(0o600);
  });
});

describe("writes until all is taken", () => {
  test("a write that takes no bytes and says no error ends in ENOSPC, not a loop for good", () => {
    expect(tookSome(3)).toBe(3);
    expect(() => tookSome(0)).toThrow(expect.objectContaining({ code: "ENOSPC" }));
  });

  test("writeAllSync writes the whole of a large text", () => {
    using dir = tmpdir();
    const path = join(dir.path, "f");
    const fd = openSync(path, "w");
    const text = "x".repeat(3 * 1024 * 1024 + 7);
    writeAllSync(fd, text);
    closeSync(fd);
    expect(readFileSync(path, "utf8")).toBe(text);
  });
});

// A FIFO planted at a file's name (the damage note's, the reserve's): with a reader there the
// write went into the pipe; with none the open blocked the core (test/store/disk-reserve.test.ts).
describe.skipIf(!posix)("the core's files are regular files only", () => {
  test("a FIFO with a reader is refused, nothing written into it", () => {
    using dir = tmpdir();
    const path = join(dir.path, "local-ai.db.damaged");
    expect(spawnSync("mkfifo", [path]).status).toBe(0);
    const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      expect(() => writePrivateFile(path, "a problem\n")).toThrow("a FIFO");
      let read = 0;
      try {
        read = readSync(reader, Buffer.alloc(64));
      } catch {} // EAGAIN: the pipe is empty.
      expect(read).toBe(0);
    } finally {
      closeSync(reader);
    }
  });
});
