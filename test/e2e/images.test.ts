import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { b64, png } from "../fixtures/images.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Images through the compiled binary (docs/protocol.md#images) against the stand-in started
// with `--mmproj` (by `llama.extra_args`: the projector's own config is another part of issue
// 30), and without one: sent, counted, stored, fetched back, refused, erased.
const onPosix = process.platform !== "win32";

describe.skipIf(!onPosix)("images, through the compiled binary", () => {
  test("a chat with a path and base64: sent, counted, stored, given back; a FIFO and a URL refused; erased with the user", async () => {
    await using dir = tmpdir();
    const projector = join(dir.path, "mmproj.gguf");
    writeFileSync(projector, "");
    const stack = writeStack(dir.path, { tools: [] });
    // The stand-in reads images when started with --mmproj (its vision.ts).
    const config = readFileSync(join(dir.path, "config.yaml"), "utf8").replace(
      "  stop_grace_s: 1",
      `  stop_grace_s: 1\n  extra_args: ["--mmproj", ${JSON.stringify(projector)}]`,
    );
    writeFileSync(join(dir.path, "config.yaml"), config);
    // Pixels spelling a word no other file holds, to find them on disk.
    const image = Buffer.concat([png(4, 4), Buffer.from("OKAPIPIXELS".repeat(8))]);
    const file = join(dir.path, "photo.png");
    writeFileSync(file, image);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = await core.request({
      id: 1,
      method: "chat",
      params: {
        session_id: "pic",
        input: "What is this?",
        images: [{ path: file }, { data: b64(png(2, 2)) }],
      },
    });
    expect(chat.type).toBe("result");
    expect(chat.result.response).toBe("You said: What is this? (and 2 images)");
    expect(chat.result.usage.image_tokens).toBe(128);
    const sent = JSON.stringify(stack.llamaRequests()[0]);
    expect(sent).toContain(`data:image/png;base64,${b64(image)}`);
    expect(sent).not.toContain(file);
    const got = await core.request({ id: 2, method: "sessions.get", params: { session_id: "pic" } });
    const attachments = got.result.messages[0].attachments;
    expect(attachments.map((a: { bytes: number }) => a.bytes)).toEqual([image.length, png(2, 2).length]);
    const one = await core.request({
      id: 3,
      method: "sessions.attachment",
      params: { id: attachments[0].id },
    });
    expect(Buffer.from(one.result.data, "base64").equals(image)).toBe(true);

    const fifo = join(dir.path, "pipe.png");
    Bun.spawnSync(["mkfifo", fifo]);
    const refused = await core.request({
      id: 4,
      method: "chat",
      params: { input: "x", images: [{ path: fifo }] },
    });
    expect(refused).toMatchObject({
      code: "invalid_request",
      data: { field: "images[0]", problem: "unreadable" },
    });
    const url = await core.request({
      id: 5,
      method: "chat",
      params: { input: "x", images: [{ data: "https://example.com/a.png" }] },
    });
    expect(url.data).toMatchObject({ field: "images[0]", problem: "url" });
    // A ping is answered while nothing hangs on the FIFO.
    expect((await core.request({ id: 6, method: "ping" })).result).toEqual({ status: "ok" });

    expect(filesHolding(stack.dataDir, Buffer.from("OKAPIPIXELS"), "logs").length).toBeGreaterThan(0);
    await core.request({ id: 7, method: "users.delete", params: {} });
    expect(filesHolding(stack.dataDir, Buffer.from("OKAPIPIXELS"), "logs")).toEqual([]);
  });

  test("a model without a projector: model_not_vision, and the session stays empty", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = await core.request({
      id: 1,
      method: "chat",
      params: { session_id: "s", input: "look", images: [{ data: b64(png(2, 2)) }] },
    });
    expect(chat).toMatchObject({ code: "invalid_request", data: { reason: "model_not_vision" } });
    expect(stack.llamaRequests()).toEqual([]);
    const list = await core.request({ id: 2, method: "sessions.list", params: {} });
    expect(list.result.sessions).toEqual([]);
  });
});
