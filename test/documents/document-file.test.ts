import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { documentFileSize, readDocumentFile } from "../../src/documents/document-file.ts";
import { MAX_DOCUMENT_BYTES } from "../../src/documents/limits.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import { deadDrive } from "../fixtures/dead-drive.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const refused = (problem: string, message: RegExp) =>
  expect.objectContaining({
    code: "invalid_request",
    // The file is the `path` param's: a host's form marks that field.
    data: { field: "path", problem },
    message: expect.stringMatching(message),
  });

describe("a document read from a path", () => {
  test("a UTF-16 file, read through the edge", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "notes");
    writeFileSync(path, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("# Hi\n\nthere", "utf16le")]));
    const read = await readDocument({ path }, { readFile: readDocumentFile });
    expect(read).toMatchObject({ format: "markdown", encoding: "utf-16le", chunks: [{ text: "there" }] });
  });

  test("a FIFO and a directory are refused without blocking, naming the path", async () => {
    using dir = tmpdir();
    const fifo = join(dir.path, "pipe");
    execFileSync("mkfifo", [fifo]);
    await expect(readDocumentFile(fifo)).rejects.toThrow(refused("unreadable", /pipe is a FIFO/));
    mkdirSync(join(dir.path, "sub"));
    await expect(readDocumentFile(join(dir.path, "sub"))).rejects.toThrow(
      refused("unreadable", /sub is a directory/),
    );
  });

  test("a symbolic link loop and a missing file are errors naming the path", async () => {
    using dir = tmpdir();
    const a = join(dir.path, "a");
    symlinkSync(join(dir.path, "b"), a);
    symlinkSync(a, join(dir.path, "b"));
    await expect(readDocumentFile(a)).rejects.toThrow(
      refused("unreadable", /\/a cannot be read: a loop of symbolic links/),
    );
    await expect(readDocumentFile(join(dir.path, "gone"))).rejects.toThrow(
      refused("unreadable", /gone .*no such file/),
    );
    // Relative to nothing the host chose: refused as an image's is.
    await expect(readDocumentFile("notes.md")).rejects.toThrow(
      refused("unreadable", /path must be absolute/),
    );
    // Not Node's "must be a string, Uint8Array, or URL without null bytes".
    await expect(readDocumentFile(join(dir.path, "a\0.txt"))).rejects.toThrow(
      refused("unreadable", /cannot be read: the path holds a NUL character$/),
    );
  });

  test("a file over the limit is refused by its size before a byte is read (sparse: nothing written)", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "huge.pdf");
    writeFileSync(path, "");
    truncateSync(path, 1024 ** 3);
    await expect(readDocumentFile(path)).rejects.toThrow(
      refused("too_large", new RegExp(`over the ${MAX_DOCUMENT_BYTES} bytes`)),
    );
  });
});

// The add's first look at the file, its size for the reading budget, was a stat of its own,
// awaited until a cancel: an add without one waited for good on a drive gone offline, and each
// add sent again held one more of the runtime's few file threads with its stat, until every file
// read and write of the core waited behind them. It is asked as a model's path is (drives).
describe("a document's size on a drive that does not answer", () => {
  test("is refused unreadable once the drive's wait is over, the stat asked through the drives", async () => {
    const asked: string[] = [];
    const dead = deadDrive(asked);
    await expect(documentFileSize("/offline/notes.md", dead)).rejects.toEqual(
      refused("unreadable", /^\/offline\/notes\.md: its drive did not answer within 0 s/),
    );
    expect(asked).toEqual(["/offline/notes.md"]);
  });
});
