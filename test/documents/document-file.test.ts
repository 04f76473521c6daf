import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readDocumentFile } from "../../src/documents/document-file.ts";
import { MAX_DOCUMENT_BYTES } from "../../src/documents/limits.ts";
import { readDocument } from "../../src/documents/read-document.ts";
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
