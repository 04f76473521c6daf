import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { brotliCompressSync, constants } from "node:zlib";
import { hiddenStream } from "../documents/pdf-raw.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { minimalPdf } from "../fixtures/pdf-writer.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 29 through the compiled binary: documents added to the library and to a session,
// cited by a chat (the llama-server stand-in), deleted with nothing left on disk; a ping
// answered while a big PDF is read; two cores adding into one data folder.
const onPosix = process.platform !== "win32";

/** Files under `dir` holding `marker`, but llama-server's own log (what the stand-in was sent). */

describe.skipIf(!onPosix)("documents through the compiled binary", () => {
  test("library Markdown and a session's PDF: listed, cited by a chat, deleted with nothing readable left", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const md = join(dir.path, "notes.md");
    writeFileSync(md, "# Narwhals\n\nThe NARWHAL tusk is a tooth.\n");
    const pdf = join(dir.path, "guide.pdf");
    writeFileSync(
      pdf,
      minimalPdf([["Cover"], ["A NARWHAL guide, page two"], ["KRILLWORD plankton, never recalled"]]),
    );
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    expect(
      (await core.request({ id: "c0", method: "chat", params: { session_id: "s", input: "hi" } }, 30_000))
        .type,
    ).toBe("result");
    const lib = await core.request({ id: "a1", method: "documents.add", params: { path: md } });
    expect(lib.result).toMatchObject({ name: "notes.md", format: "markdown", chunks: 1 });
    const att = await core.request({
      id: "a2",
      method: "documents.add",
      params: { path: pdf, session_id: "s" },
    });
    expect(att.result).toMatchObject({ name: "guide.pdf", format: "pdf", chunks: 3 });
    const list = await core.request({ id: "l", method: "documents.list", params: {} });
    expect(list.result.documents.map((d: { name: string }) => d.name).sort()).toEqual([
      "guide.pdf",
      "notes.md",
    ]);

    const chat = await core.request(
      { id: "c1", method: "chat", params: { session_id: "s", input: "what about the narwhal?" } },
      30_000,
    );
    const names = chat.result.sources
      .map((s: { kind: string; name: string }) => `${s.kind}:${s.name}`)
      .sort();
    expect(names).toEqual(["document:guide.pdf", "document:notes.md"]);
    const done = core.messages.find((m) => m.id === "c1" && m.event === "memory_done");
    expect(done?.sources).toEqual(chat.result.sources);
    const got = await core.request({ id: "g", method: "sessions.get", params: { session_id: "s" } });
    expect(got.result.messages.at(-1).sources).toEqual(chat.result.sources);

    await core.request({
      id: "d1",
      method: "documents.delete",
      params: { document_id: att.result.document_id },
    });
    // (The stand-in's answer quotes the recalled passages, which stay with the session; the
    // third page was never recalled, so the delete leaves it nowhere.)
    expect(filesHolding(stack.dataDir, "KRILLWORD", "logs")).toEqual([]);
    const del = await core.request({ id: "d2", method: "users.delete", params: {} });
    expect(del.type).toBe("result");
    expect(filesHolding(stack.dataDir, "tusk is a tooth", "logs")).toEqual([]);
    expect(filesHolding(stack.dataDir, "NARWHAL", "logs")).toEqual([]);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  }, 60_000);

  test("a ping is answered while a 1500-page PDF is read; two cores add into one data folder", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const pdf = join(dir.path, "book.pdf");
    writeFileSync(
      pdf,
      minimalPdf(Array.from({ length: 1500 }, (_, i) => [`Page ${i}`, "lorem ipsum ".repeat(60)])),
    );
    const txt = join(dir.path, "other.txt");
    writeFileSync(
      txt,
      Array.from({ length: 2000 }, (_, i) => `Paragraph ${i} ${"dolor sit ".repeat(100)}`).join("\n\n"),
    );
    await using a = spawnCore({ cwd: dir.path, env: stack.env });
    await using b = spawnCore({ cwd: dir.path, env: stack.env });
    // Both open the database first, one after the other: two cores creating a fresh database at
    // the same instant is another matter (its open can meet the other's migration).
    expect((await a.request({ id: "l0", method: "documents.list", params: {} })).type).toBe("result");
    expect((await b.request({ id: "l0", method: "documents.list", params: {} })).type).toBe("result");
    a.send({ id: "big", method: "documents.add", params: { path: pdf } });
    b.send({ id: "txt", method: "documents.add", params: { path: txt } });
    await a.waitFor((m) => m.some((x) => x.id === "big" && x.event === "index_progress"), 30_000);
    const ping = await a.request({ id: "p", method: "ping" });
    expect(ping.result).toEqual({ status: "ok" });
    expect(a.terminal("big")).toBeUndefined();
    await a.waitFor(() => a.terminal("big") !== undefined, 60_000);
    await b.waitFor(() => b.terminal("txt") !== undefined, 60_000);
    expect(a.terminal("big")?.result).toMatchObject({ format: "pdf", chunks: 1500 });
    expect(b.terminal("txt")?.result).toMatchObject({ format: "text" });
    const list = await b.request({ id: "l", method: "documents.list", params: {} });
    expect(list.result.documents).toHaveLength(2);
    a.closeStdin();
    b.closeStdin();
    expect(await a.exited()).toBe(0);
    expect(await b.exited()).toBe(0);
  }, 120_000);

  test("a Brotli bomb hidden from the stream pass: too_large, the core's memory bounded, a ping answered", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    const pdf = join(dir.path, "bomb.pdf");
    // 1 GiB of NULs, ~190 KB compressed, inside another stream's data where only the
    // cross-reference table leads (docs/agent.md "Documents": the memory watch bounds it).
    const bomb = brotliCompressSync(Buffer.alloc(1024 * 1024 * 1024), {
      params: { [constants.BROTLI_PARAM_QUALITY]: 1 },
    });
    writeFileSync(pdf, hiddenStream(bomb, "/BrotliDecode"));
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    await core.request({ id: "l0", method: "documents.list", params: {} });
    core.send({ id: "bomb", method: "documents.add", params: { path: pdf } });
    const ping = await core.request({ id: "p", method: "ping" });
    expect(ping.result).toEqual({ status: "ok" });
    await core.waitFor(() => core.terminal("bomb") !== undefined, 60_000);
    expect(core.terminal("bomb")).toMatchObject({
      type: "error",
      code: "invalid_request",
      data: { problem: "too_large" },
    });
    if (process.platform === "linux") {
      // The core's highest resident memory: the 1 GiB bound and what the core held before it.
      const status = readFileSync(`/proc/${core.proc.pid}/status`, "utf8");
      const peakKiB = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1]);
      expect(peakKiB * 1024).toBeLessThan(1.5 * 1024 * 1024 * 1024);
    }
    const list = await core.request({ id: "l", method: "documents.list", params: {} });
    expect(list.result.documents).toEqual([]);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  }, 120_000);
});
