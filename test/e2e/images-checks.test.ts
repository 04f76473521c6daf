import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { mmproj } from "../fixtures/gguf-mmproj.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { b64, bmp, gif, png, webp } from "../fixtures/images.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Images' checks from the compiled binary (docs/protocol.md#images): the app's limits,
// the format known by the bytes, GIF and BMP sent on, another user's attachment, a regenerate and
// an edit sending the images again; the projector as doctor and the models listing see it.

/** The `data:` types of the images llama-server was sent in the requests from `from` on. */
const sentTypes = (stack: ReturnType<typeof writeStack>, from: number) =>
  JSON.stringify(stack.llamaRequests().slice(from)).match(/data:image\/[a-z]+/g) ?? [];

function setMmproj(dir: string, value: string): void {
  const file = join(dir, "config.yaml");
  writeFileSync(
    file,
    readFileSync(file, "utf8").replace("  context: 2048\n", `  context: 2048\n  mmproj: ${value}\n`),
  );
}

describe.skipIf(process.platform === "win32")("images' checks (compiled core)", () => {
  test("app limits, formats by their bytes, another user's attachment, regenerate and replace_from resend", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [], app: ["max_images: 2", "max_image_pixels: 1000"] });
    writeGguf(dir.path, "proj.gguf", mmproj());
    setMmproj(dir.path, "./proj.gguf");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const chat = (id: string, params: Record<string, unknown>) =>
      core.request({ id, method: "chat", params: { input: "x", ...params } }, 30_000);
    const image = (b: Buffer, mime?: string) => ({ data: b64(b), ...(mime ? { mime } : {}) });

    const three = await chat("3", { images: [image(png(2, 2)), image(png(2, 2)), image(png(2, 2))] });
    expect(three).toMatchObject({
      code: "invalid_request",
      data: { field: "images[2]", problem: "too_many_images" },
    });
    const wide = await chat("px", { images: [image(png(40, 40))] });
    expect(wide).toMatchObject({ data: { field: "images[0]", problem: "too_many_pixels" } });
    // `mime` is not trusted: a PNG called a JPEG goes as a PNG, text called a PNG is refused.
    let n = stack.llamaRequests().length;
    expect((await chat("lie", { images: [image(png(2, 2), "image/jpeg")] })).type).toBe("result");
    expect(sentTypes(stack, n)).toEqual(["data:image/png"]);
    const text = await chat("txt", { images: [image(Buffer.from("hello, I am text"), "image/png")] });
    expect(text).toMatchObject({ data: { field: "images[0]", problem: "unsupported_format" } });
    expect(await chat("webp", { images: [image(webp())] })).toMatchObject({
      data: { problem: "unsupported_format" },
    });
    n = stack.llamaRequests().length;
    const gifBmp = await chat("gb", { images: [image(gif(2, 2)), image(bmp(2, 2))] });
    expect(gifBmp.result.usage.image_tokens).toBe(128);
    expect(sentTypes(stack, n)).toEqual(["data:image/gif", "data:image/bmp"]);

    expect((await chat("p", { session_id: "p", images: [image(png(3, 3))] })).type).toBe("result");
    const got = await core.request({ id: "g", method: "sessions.get", params: { session_id: "p" } });
    const id = got.result.messages[0].attachments[0].id;
    const other = await core.request({
      id: "o",
      method: "sessions.attachment",
      params: { id, user_id: "bob" },
    });
    expect(other).toMatchObject({ code: "invalid_request", data: { reason: "attachment_not_found" } });
    n = stack.llamaRequests().length;
    const again = await chat("r", { session_id: "p", input: "", regenerate: true });
    expect(again.result.usage.image_tokens).toBe(64);
    expect(sentTypes(stack, n)).toEqual(["data:image/png"]);
    n = stack.llamaRequests().length;
    const edited = await chat("rf", { session_id: "p", input: "y", replace_from: 0 });
    expect(edited.result.response).toBe("You said: y (and 1 image)");
    expect(sentTypes(stack, n)).toEqual(["data:image/png"]);
  }, 60_000);

  test("a projector of another width fails doctor's check; one that matches makes the models listing say vision", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {});
    writeGguf(dir.path, "wide-mmproj.gguf", mmproj({ width: 128 }));
    setMmproj(dir.path, "./wide-mmproj.gguf");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const doctor = (await core.request({ id: 1, method: "doctor" }, 30_000)).result;
    expect(doctor.ok).toBe(false);
    expect(doctor.checks.find((c: any) => c.id === "projector")).toMatchObject({
      status: "fail",
      data: { code: "model_plan_error", problem: "width_mismatch", projector_width: 128, model_width: 64 },
    });
    const listing = (await core.request({ id: 2, method: "models" }, 30_000)).result.models;
    expect(listing.find((m: any) => m.file === "model.gguf").vision).toBe(false);
    core.closeStdin();
    expect(await core.exited()).toBe(0);

    writeGguf(dir.path, "wide-mmproj.gguf", mmproj());
    await using next = spawnCore({ cwd: dir.path, env: stack.env });
    const listed = (await next.request({ id: 3, method: "models" }, 30_000)).result.models;
    expect(listed.find((m: any) => m.file === "model.gguf")).toMatchObject({ name: "default", vision: true });
  }, 60_000);
  test("images that cannot fit: context_overflow naming the counts; a later turn sends older images as [image]", async () => {
    await using dir = tmpdir();
    // memory.top_k 0: nothing recalled, so the prompt is the session's turns alone.
    const stack = writeStack(dir.path, { tools: [], extraYaml: "  top_k: 0" });
    writeGguf(dir.path, "proj.gguf", mmproj());
    const file = join(dir.path, "config.yaml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace("  context: 2048\n", "  context: 512\n  mmproj: ./proj.gguf\n"),
    );
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    // The stand-in's projector: 64 tokens an image (recording 103's mlp).
    const images = (count: number, seed: number) =>
      Array.from({ length: count }, (_, i) => ({ data: b64(png(3, 3, { seed: seed + i })) }));
    const chat = (id: string, params: Record<string, unknown>) =>
      core.request({ id, method: "chat", params }, 30_000);
    const over = await chat("o", { input: "x", images: images(8, 0) });
    expect(over).toMatchObject({ code: "invalid_request", data: { reason: "context_overflow", n_ctx: 512 } });
    expect(over.data.n_prompt_tokens).toBeGreaterThan(512);
    expect(over.message).toContain("8 images");

    expect(
      (await chat("a", { session_id: "s", input: "first", images: images(4, 10) })).result.usage.image_tokens,
    ).toBe(256);
    const n = stack.llamaRequests().length;
    const later = await chat("b", { session_id: "s", input: "second", images: images(3, 20) });
    // The first turn's four would not fit beside the new three: sent as text, the new ones whole.
    expect(later.result.usage.image_tokens).toBe(192);
    const sent = JSON.stringify(stack.llamaRequests().slice(n));
    expect(sent.match(/data:image\/png/g)).toHaveLength(3);
    expect(sent).toContain("[image]");
    const kept = await core.request({ id: "g", method: "sessions.get", params: { session_id: "s" } });
    expect(kept.result.messages[0].attachments).toHaveLength(4);
  }, 60_000);
});
