import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CLIENT_DEFAULTS } from "../../src/client/client-options.ts";
import { heldImages } from "../../src/images/held.ts";
import { MAX_HELD_IMAGE_BYTES, MAX_IMAGE_BYTES } from "../../src/images/limits.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { b64, png, pngChunk, webp } from "../fixtures/images.ts";
import { readDb } from "../fixtures/read-db.ts";
import { ChatHarness, type Msg } from "./harness.ts";

// A chat's images (docs/protocol.md#images) through the real chat method against the stand-in
// as a vision server (test/fixtures/llama-stand-in/vision.ts, transcripts 100–109): sent as
// content parts, counted, stored with the message, resent, and refused where they cannot go.

const AGENTS = { agents: [{ name: "a", system_prompt: "Be brief.", tools: [] }] };
const vision = (nCtx = 8192) => ({ standIn: () => ({ vision: { tokensPerImage: 64 }, nCtx }) });

type Json = Record<string, any>;
const result = (m: Msg) => m.result as Json;
/** The user message of the stand-in's `n`th request (its last user message). */
const userParts = (h: ChatHarness, n: number) =>
  h.llama.requests[n]!.body.messages.filter((m) => m.role === "user").map((m) => m.content as unknown);

/** Session `s`'s turn with `image`, broken off mid-stream (its checkpoint kept); the next reply scripted. */
async function brokenOff(h: ChatHarness, image: Buffer): Promise<void> {
  h.llama.script({ content: ["par", "tial"], crash_after_chunks: 3 }, { content: "done" });
  const broken = await h.chat(1, { session_id: "s", input: "look", images: [{ data: b64(image) }] });
  expect(broken.terminal.type).toBe("error");
}

describe("a chat with images", () => {
  test("sent as image_url parts after the text (101), counted in usage.image_tokens (103), kept with the message", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "A square." });
    const image = png(8, 8);
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "What is this?",
      images: [{ data: b64(image) }],
    });
    expect(terminal.type).toBe("result");
    const [sent] = userParts(h, 0) as Json[][];
    expect(sent).toEqual([
      { type: "text", text: "What is this?" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${b64(image)}` } },
    ]);
    expect(result(terminal).usage.image_tokens).toBe(64);
    h.send(2, "sessions.get", { session_id: "s" });
    const page = result(await h.terminal(2));
    const attachments = page.messages[0].attachments;
    expect(attachments).toEqual([{ id: expect.any(Number), mime: "image/png", bytes: image.length }]);
    h.send(3, "sessions.attachment", { id: attachments[0].id });
    const got = result(await h.terminal(3));
    expect(Buffer.from(got.data, "base64").equals(image)).toBe(true);
    h.send(4, "sessions.attachment", { user_id: "mallory", id: attachments[0].id });
    expect((await h.terminal(4)).data).toMatchObject({ reason: "attachment_not_found" });
  });

  test("a path is read by the core; the model sees the bytes, never the path", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "ok" });
    const file = join(h.dir.path, "shot.png");
    writeFileSync(file, png(4, 4));
    const { terminal } = await h.chat(1, { input: "see", images: [{ path: file }] });
    expect(terminal.type).toBe("result");
    expect(JSON.stringify(h.llama.requests[0]!.body)).not.toContain(file);
    expect(JSON.stringify(h.llama.requests[0]!.body)).toContain(b64(png(4, 4)));
  });

  test("the largest image a chat takes is read back whole by the typed client (its answer line fits maxLineBytes)", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "ok" });
    const small = png(2, 2);
    const filler = MAX_IMAGE_BYTES - small.length - 12;
    const big = Buffer.concat([
      small.subarray(0, small.length - 12),
      pngChunk("teXt", Buffer.alloc(filler, 0x41)),
      small.subarray(small.length - 12),
    ]);
    expect(big.length).toBe(MAX_IMAGE_BYTES);
    const file = join(h.dir.path, "photo.png");
    writeFileSync(file, big);
    const { terminal } = await h.chat(1, { session_id: "s", input: "see", images: [{ path: file }] });
    expect(terminal.type).toBe("result");
    const id = (h.history("s")[0] as Json).attachments[0].id;
    h.send(2, "sessions.attachment", { id });
    const answer = await h.terminal(2);
    expect(result(answer).bytes).toBe(MAX_IMAGE_BYTES);
    // As the writer puts it on stdout: one line, its newline included.
    expect(Buffer.byteLength(`${JSON.stringify(answer)}\n`)).toBeLessThanOrEqual(
      CLIENT_DEFAULTS.maxLineBytes,
    );
  }, 60_000);

  test("a chat whose images do not fit beside those held waits before run_start, cancellable; it runs once room is made", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "ok" });
    const file = join(h.dir.path, "shot.png");
    writeFileSync(file, png(4, 4));
    // Another chat's images hold all the room.
    const release = await heldImages.acquire(MAX_HELD_IMAGE_BYTES, new AbortController().signal);
    h.send(1, "chat", { input: "see", images: [{ path: file }] });
    h.send(2, "chat", { input: "see too", images: [{ path: file }] });
    await Bun.sleep(100);
    expect(h.events(1)).toEqual([]);
    h.send(3, "cancel", { request_id: 2 });
    expect((await h.terminal(2)).code).toBe("cancelled");
    release();
    expect((await h.terminal(1)).type).toBe("result");
    expect(h.events(1)[0]?.event).toBe("run_start");
    expect(heldImages.inUse).toBe(0);
  });

  test("a file that grows while its chat waits for room is refused, never read past the room it holds", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "ok" });
    const file = join(h.dir.path, "being-saved.png");
    const small = png(2, 2);
    writeFileSync(file, small);
    // The room is taken by the file's size at the request; it waits behind another chat's images.
    const release = await heldImages.acquire(MAX_HELD_IMAGE_BYTES, new AbortController().signal);
    h.send(1, "chat", { input: "see", images: [{ path: file }] });
    await Bun.sleep(100);
    // Meanwhile the file becomes 8 MB: read, it would hold 8 MB on a room of a few dozen bytes.
    const tail = small.length - 12;
    const big = pngChunk("teXt", Buffer.alloc(8 * 2 ** 20, 0x41));
    writeFileSync(file, Buffer.concat([small.subarray(0, tail), big, small.subarray(tail)]));
    release();
    const answer = await h.terminal(1);
    expect(answer.code).toBe("invalid_request");
    expect(answer.data).toMatchObject({ field: "images[0]", problem: "unreadable" });
    expect(h.llama.requests.length).toBe(0);
    expect(heldImages.inUse).toBe(0);
  });

  test("a model whose server reads no images: model_not_vision, nothing sent, the session as it was (105)", async () => {
    await using h = new ChatHarness(AGENTS, { standIn: () => ({}) });
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "look",
      images: [{ data: b64(png(2, 2)) }],
    });
    expect(terminal.type).toBe("error");
    expect(terminal.code).toBe("invalid_request");
    expect(terminal.data).toMatchObject({ reason: "model_not_vision", field: "images" });
    expect(h.llama.requests).toHaveLength(0);
    expect(h.history("s")).toEqual([]);
    expect(h.checkpoint("s")).toBeUndefined();
  });

  test("a resume of a step with calls pending, refused for its images: loop_abort names that step, as its tool events would", async () => {
    await using h = new ChatHarness(AGENTS, { standIn: () => ({}) });
    const call = { id: "c1", type: "function" as const, function: { name: "t__echo", arguments: "{}" } };
    h.writeCheckpoint("s", {
      version: 1,
      trace_id: "0000000000000000",
      user_input: "look",
      agent: "a",
      step: 1,
      parse_errors: 0,
      best_text: "",
      turn: [
        { role: "user", content: "look", attachments: [{ id: 1, mime: "image/png", bytes: 10 }] },
        { role: "assistant", content: null, tool_calls: [call] },
      ],
      updated_at: "2026-01-01T00:00:00.000Z",
    });
    const { terminal, events } = await h.chat(1, { session_id: "s", resume: true });
    expect(terminal.data).toMatchObject({ reason: "model_not_vision", field: "images" });
    // The interrupted step is 0: its calls' tool events would name it, as a cancel's loop_abort does.
    expect(events.at(-1)).toMatchObject({ event: "loop_abort", step: 0 });
    expect(h.llama.requests).toHaveLength(0);
  });

  test("a model configured without a projector: model_not_vision before any image is read or the model loaded", async () => {
    await using h = new ChatHarness({ ...AGENTS, model: { mmproj: "none" } }, { standIn: () => ({}) });
    let acquired = 0;
    h.provider.beforeLease = async () => {
      acquired++;
    };
    // A path that is not there: read, it would be refused `unreadable` first.
    const missing = join(h.dir.path, "not-there.png");
    const { terminal } = await h.chat(1, { session_id: "s", input: "look", images: [{ path: missing }] });
    expect(terminal.data).toMatchObject({ reason: "model_not_vision", field: "images" });
    expect(acquired).toBe(0);
    expect(h.history("s")).toEqual([]);
    expect(h.checkpoint("s")).toBeUndefined();
  });

  test("a resume with nothing to resume, for a model configured without a projector: refused before the model loads", async () => {
    // Its images are the new turn's: refused only by the turn's own check, after the model's
    // start and its acquire, a load (or a swap evicting another) for a chat refused anyway.
    await using h = new ChatHarness({ ...AGENTS, model: { mmproj: "none" } }, { standIn: () => ({}) });
    let acquired = 0;
    h.provider.beforeLease = async () => {
      acquired++;
    };
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "look",
      resume: true,
      images: [{ data: b64(png(2, 2)) }],
    });
    expect(terminal.data).toMatchObject({ reason: "model_not_vision", field: "images" });
    expect(acquired).toBe(0);
    expect(h.history("s")).toEqual([]);
    expect(h.checkpoint("s")).toBeUndefined();
  });

  test("extra_args that add a projector leave it to llama-server's /props: the image is read", async () => {
    const config = { ...AGENTS, model: { mmproj: "none" }, llama: { extra_args: ["--mmproj", "/m/p.gguf"] } };
    await using h = new ChatHarness(config, { standIn: () => ({}) });
    const missing = join(h.dir.path, "not-there.png");
    const { terminal } = await h.chat(1, { input: "look", images: [{ path: missing }] });
    expect(terminal.data).toMatchObject({ field: "images[0]", problem: "unreadable" });
  });

  test("a projector flag spelled as llama-server also reads it (--hf_repo, --mmproj_url=) is one too", async () => {
    // common/arg.cpp reads a `--` flag's `_` as `-`: `--hf_repo` downloads the repo's projector
    // as `--hf-repo` does, so the model may read images; refused unread, they never reached it.
    for (const extra_args of [["--hf_repo", "org/vision-GGUF"], ["--mmproj_url=http://127.0.0.1:1/p.gguf"]]) {
      const config = { ...AGENTS, model: { mmproj: "none" }, llama: { extra_args } };
      await using h = new ChatHarness(config, { standIn: () => ({}) });
      const missing = join(h.dir.path, "not-there.png");
      const { terminal } = await h.chat(1, { input: "look", images: [{ path: missing }] });
      expect(terminal.data).toMatchObject({ field: "images[0]", problem: "unreadable" });
    }
  });

  test("a server whose /props already said it reads no images: the next chat's images are refused unread", async () => {
    await using h = new ChatHarness(AGENTS, { standIn: () => ({}) });
    h.llama.script({ content: "hi" });
    expect((await h.chat(1, { input: "hello" })).terminal.type).toBe("result");
    const missing = join(h.dir.path, "not-there.png");
    const { terminal } = await h.chat(2, { session_id: "s", input: "look", images: [{ path: missing }] });
    expect(terminal.data).toMatchObject({ reason: "model_not_vision", field: "images" });
  });

  test("a photo refused for a model that reads none leaves none of its bytes under data_dir (the log included)", async () => {
    await using h = new ChatHarness(AGENTS, { standIn: () => ({}) });
    const marker = "PRIVATE-PHOTO-BYTES-";
    const small = png(2, 2);
    const text = Buffer.from(marker.repeat(Math.ceil((2.5 * 1024 * 1024) / marker.length)));
    const photo = Buffer.concat([
      small.subarray(0, small.length - 12),
      pngChunk("teXt", text),
      small.subarray(small.length - 12),
    ]);
    const { terminal } = await h.chat(1, { session_id: "s", input: "look", images: [{ data: b64(photo) }] });
    expect(terminal.data).toMatchObject({ reason: "model_not_vision" });
    const holding = readdirSync(h.dataDir).filter((f) => {
      const path = join(h.dataDir, f);
      return statSync(path).isFile() && readFileSync(path).includes(marker);
    });
    expect(holding).toEqual([]);
    const db = readDb(join(h.dataDir, "local-ai.db"));
    try {
      expect(db.query("SELECT 1 FROM meta WHERE key = 'rewrite_owed'").get()).toBeNull();
    } finally {
      db.close();
    }
  });

  test("llama-server's own 'image input is not supported' is model_not_vision too, never internal_error (105)", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({
      error: {
        status: 500,
        message:
          "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj",
      },
    });
    const { terminal } = await h.chat(1, { input: "look", images: [{ data: b64(png(2, 2)) }] });
    expect(terminal.data).toMatchObject({ reason: "model_not_vision" });
    // What it can read, not a failure: a restart would fail every other chat on it and change
    // nothing (the same server, the same flags), so each image chat would restart it again.
    expect(h.provider.failures).toEqual([]);
  });

  test("llama-server's 413 (a body over its 100 MiB) is invalid_request too_large, never internal_error", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ error: { status: 413, message: "Payload Too Large" } });
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "look",
      images: [{ data: b64(png(2, 2)) }],
    });
    expect(terminal).toMatchObject({
      code: "invalid_request",
      data: { field: "images[0]", problem: "too_large" },
    });
    expect(h.history("s")).toEqual([]);
    expect(h.checkpoint("s")).toBeUndefined();
  });

  test("a bad image is refused before llama-server is asked for anything, naming images[i]", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    for (const [i, images] of [
      [1, [{ data: b64(png(2, 2)) }, { data: b64(webp()) }]],
      [0, [{ data: "http://example.com/cat.png" }]],
      [0, [{ path: "/dev/null/none.png" }]],
    ] as const) {
      const { terminal } = await h.chat(`c${i}${images.length}`, { input: "look", images });
      expect(terminal.code).toBe("invalid_request");
      expect(terminal.data).toMatchObject({ field: `images[${i}]` });
    }
    expect(h.llama.requests).toHaveLength(0);
    expect(h.llama.model.remoteFetches).toBe(0);
  });

  test("an image path over 4096 characters fails the params' check, not echoed back whole", async () => {
    // A megabyte of path came back inside the refusal's message (`path must be absolute (…)`,
    // `… cannot be read: the path is too long`): a megabyte error line, as a document's path is capped.
    await using h = new ChatHarness(AGENTS, vision());
    for (const path of [`/${"p".repeat(1_000_000)}.png`, `${"r".repeat(1_000_000)}.png`]) {
      const { terminal } = await h.chat(`long${path[0]}`, { input: "look", images: [{ path }] });
      expect(terminal.code).toBe("invalid_request");
      expect(JSON.stringify(terminal).length).toBeLessThan(10_000);
      expect(terminal.data).toMatchObject({ field: "images.0.path" });
    }
    expect(h.llama.requests).toHaveLength(0);
  });

  test("a prompt whose image cannot fit: invalid_request with the token counts (104)", async () => {
    await using h = new ChatHarness(AGENTS, vision(60));
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "look",
      images: [{ data: b64(png(2, 2)) }],
    });
    expect(terminal.code).toBe("invalid_request");
    expect(terminal.data).toMatchObject({ reason: "context_overflow", n_ctx: 60 });
    expect((terminal.data as Json).n_prompt_tokens).toBeGreaterThan(64);
    // The advice names the image, not only the input (a 1 × 4000 image took ~1,440 tokens of
    // the real pixtral projector under --image-max-tokens 128: docs/plan.md).
    expect(String(terminal.message)).toContain("its image takes part of it");
    expect(h.history("s")).toEqual([]);
  });

  test("the next turn sends the image again, from the slot's cache (106f)", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "A square." }, { content: "Still a square." });
    await h.chat(1, { session_id: "s", input: "What is this?", images: [{ data: b64(png(8, 8)) }] });
    const { terminal } = await h.chat(2, { session_id: "s", input: "And now?" });
    const [first] = userParts(h, 1) as Json[][];
    expect(first?.[1]?.type).toBe("image_url");
    const usage = result(terminal).usage;
    expect(usage.image_tokens).toBe(64);
    expect(usage.cached_tokens).toBeGreaterThanOrEqual(64);
  });

  test("regenerate and replace_from send the replaced message's images again; an edit with its own replaces them", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "one" }, { content: "two" }, { content: "three" }, { content: "four" });
    await h.chat(1, { session_id: "s", input: "look", images: [{ data: b64(png(3, 3)) }] });
    const id = (h.history("s")[0] as Json).attachments[0].id;
    await h.chat(2, { session_id: "s", regenerate: true });
    expect((userParts(h, 1)[0] as Json[])[1]!.image_url.url).toContain(b64(png(3, 3)));
    expect((h.history("s")[0] as Json).attachments[0].id).toBe(id);
    await h.chat(3, { session_id: "s", replace_from: 0, input: "look again" });
    expect((userParts(h, 2)[0] as Json[])[1]!.image_url.url).toContain(b64(png(3, 3)));
    await h.chat(4, {
      session_id: "s",
      replace_from: 0,
      input: "this one",
      images: [{ data: b64(png(5, 5)) }],
    });
    expect((userParts(h, 3)[0] as Json[])[1]!.image_url.url).toContain(b64(png(5, 5)));
    h.send(5, "sessions.attachment", { id });
    expect((await h.terminal(5)).type).toBe("error");
    const { terminal } = await h.chat(6, {
      session_id: "s",
      regenerate: true,
      images: [{ data: b64(png(1, 1)) }],
    });
    expect(terminal.data).toMatchObject({ field: "images" });
    const empty = await h.chat(8, { session_id: "s", regenerate: true, images: [] });
    expect(empty.terminal.data).toMatchObject({ field: "images" });
  });

  test("a regenerate whose stored image llama-server cannot decode names that attachment, not params.images", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    const undecodable = { status: 400, message: "Failed to load image or audio file" }; // 106b
    h.llama.script({ content: "one" }, { error: undecodable });
    await h.chat(1, { session_id: "s", input: "look", images: [{ data: b64(png(3, 3)) }] });
    const id = (h.history("s")[0] as Json).attachments[0].id;
    const { terminal } = await h.chat(2, { session_id: "s", regenerate: true });
    // The host sent no images on it: what it can act on is the stored message's attachment.
    expect(terminal.data).toEqual({ attachments: [id], problem: "damaged" });
    expect(String(terminal.message)).not.toContain("params.images");
    expect(String(terminal.message)).toContain(`attachment ${id}`);
  });

  test("a later turn whose stored image's size no image has is refused naming that attachment; the database not marked", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "one" }, { content: "two" });
    await h.chat(1, { session_id: "s", input: "look", images: [{ data: b64(png(3, 3)) }] });
    const id = (h.history("s")[0] as Json).attachments[0].id;
    const db = new Database(join(h.dataDir, "local-ai.db"));
    db.exec("PRAGMA busy_timeout = 10000");
    db.query("UPDATE attachments SET bytes = ? WHERE id = ?").run(2 ** 40, id);
    db.close();
    const { terminal } = await h.chat(2, { session_id: "s", input: "and now?" });
    // As an image llama-server cannot decode is (106b): the host can find the message and edit it.
    expect(terminal).toMatchObject({
      code: "invalid_request",
      data: { attachments: [id], problem: "damaged" },
    });
    expect(String(terminal.message)).toContain(`attachment ${id}`);
    expect(h.history("s")).toHaveLength(2);
    expect(existsSync(join(h.dataDir, "local-ai.db.damaged"))).toBe(false);
  });

  test("an edit with images: [] takes the replaced message's images away, erased", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    h.llama.script({ content: "one" }, { content: "two" });
    // 256 KiB of its own (a chunk before IEND): its pages are freed when it goes, unless rewritten.
    const small = png(3, 3);
    const photo = Buffer.concat([
      small.subarray(0, small.length - 12),
      pngChunk("teXt", Buffer.alloc(256 * 1024, 0x51)),
      small.subarray(small.length - 12),
    ]);
    await h.chat(1, { session_id: "s", input: "look", images: [{ data: b64(photo) }] });
    const id = (h.history("s")[0] as Json).attachments[0].id;
    await h.chat(2, { session_id: "s", replace_from: 0, input: "never mind the photo", images: [] });
    const sent = h.llama.requests[1]!.body.messages.filter((m) => m.role === "user");
    expect(sent).toHaveLength(1);
    expect(sent[0]!.content).toBe("never mind the photo");
    expect((h.history("s")[0] as Json).attachments ?? []).toHaveLength(0);
    h.send(3, "sessions.attachment", { id });
    expect((await h.terminal(3)).type).toBe("error");
    // Erased as a delete's images are: the pages rewritten after the commit (docs/agent.md "Privacy").
    const db = readDb(join(h.dataDir, "local-ai.db"));
    try {
      expect(db.query("SELECT 1 FROM meta WHERE key = 'rewrite_owed'").get()).toBeNull();
      expect(db.query("PRAGMA freelist_count").get()).toEqual({ freelist_count: 0 });
    } finally {
      db.close();
    }
  });

  test("a server's absurd prompt_tokens (1e999, past the context) counts no image: the next turn still sends it", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    const event = (o: Json) => `data: ${JSON.stringify(o)}\n\n`;
    for (const absurd of ["1e999", "1e12"]) {
      h.llama.script(
        {
          raw: [
            event({ choices: [{ index: 0, delta: { content: "A square." }, finish_reason: null }] }),
            event({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
            `data: {"choices":[],"usage":{"prompt_tokens":${absurd},"completion_tokens":1}}\n\n`,
            "data: [DONE]\n\n",
          ],
        },
        { content: "Still a square." },
      );
      const session = `s${absurd}`;
      const first = await h.chat(`a${absurd}`, {
        session_id: session,
        input: "What is this?",
        images: [{ data: b64(png(8, 8)) }],
      });
      expect(first.terminal).toMatchObject({ type: "result" });
      expect(result(first.terminal).usage.image_tokens).toBeUndefined();
      await h.chat(`b${absurd}`, { session_id: session, input: "And now?" });
      const [sent] = userParts(h, h.llama.requests.length - 1) as Json[][];
      expect(sent?.[1]?.type).toBe("image_url");
    }
  });

  test("older images become [image] when the budget needs it; the turn's own are always sent", async () => {
    // 64 tokens an image; a slot of 400: three images of history do not fit beside a fourth.
    await using h = new ChatHarness(AGENTS, vision(400));
    h.llama.script({ content: "a" }, { content: "b" }, { content: "c" }, { content: "d" });
    for (let i = 0; i < 4; i++)
      await h.chat(`t${i}`, { session_id: "s", input: `image ${i}`, images: [{ data: b64(png(i + 1, 1)) }] });
    const last = h.llama.requests[3]!.body.messages.filter((m) => m.role === "user");
    expect(last).toHaveLength(4);
    expect(typeof last[0]!.content === "string" && last[0]!.content).toContain("[image]");
    expect(Array.isArray(last[3]!.content)).toBe(true);
    expect((h.history("s")[0] as Json).attachments).toHaveLength(1); // the store keeps it
  });

  test("a turn that failed mid-stream keeps its images: resume sends them again; a fresh turn drops them", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    const image = png(6, 6);
    await brokenOff(h, image);
    const staged = h.checkpoint("s")!.turn[0] as Json;
    expect(staged.attachments).toHaveLength(1);
    const { terminal } = await h.chat(2, { session_id: "s", resume: true });
    expect(terminal.type).toBe("result");
    expect((userParts(h, 1)[0] as Json[])[1]!.image_url.url).toContain(b64(image));
    expect((h.history("s")[0] as Json).attachments).toEqual(staged.attachments);
    // Interrupted again and set aside by a fresh turn: the staged image is erased.
    h.llama.script({ content: ["a"], crash_after_chunks: 2 });
    await h.chat(3, { session_id: "t", input: "look", images: [{ data: b64(png(7, 7)) }] });
    const id = (h.checkpoint("t")!.turn[0] as Json).attachments[0].id;
    h.llama.script({ content: "fresh" });
    await h.chat(4, { session_id: "t", input: "never mind" });
    h.send(5, "sessions.attachment", { id });
    expect((await h.terminal(5)).data).toMatchObject({ reason: "attachment_not_found" });
  });

  test("a resume ignores the chat's images (a stale path no longer refuses it); with nothing to resume they are checked", async () => {
    await using h = new ChatHarness(AGENTS, vision());
    const image = png(6, 6);
    await brokenOff(h, image);
    // The host sends the turn's params again with resume: its temporary file is gone by now.
    const gone = join(h.dir.path, "gone.png");
    const { terminal } = await h.chat(2, {
      session_id: "s",
      input: "look",
      resume: true,
      images: [{ path: gone }],
    });
    expect(terminal.type).toBe("result");
    expect((userParts(h, 1)[0] as Json[])[1]!.image_url.url).toContain(b64(image));
    // No interrupted turn: it runs as a new one, so its images are read and checked.
    const fresh = await h.chat(3, {
      session_id: "s",
      input: "again",
      resume: true,
      images: [{ path: gone }],
    });
    expect(fresh.terminal.data).toMatchObject({ field: "images[0]", problem: "unreadable" });
    expect(h.history("s")).toHaveLength(2);
  });

  test("a resume's ignored images hold no room in memory while the interrupted turn runs", async () => {
    // Never read, a file's room (its size; 20 MB where its stat said 0) was held all the turn
    // long, other chats' images waiting behind it.
    const held: number[] = [];
    const standIn = () => ({
      vision: { tokensPerImage: 64 },
      onRequest: () => void held.push(heldImages.inUse),
    });
    await using h = new ChatHarness(AGENTS, { standIn });
    await brokenOff(h, png(6, 6));
    const file = join(h.dir.path, "still-there.png");
    writeFileSync(file, png(64, 64));
    const { terminal } = await h.chat(2, { session_id: "s", resume: true, images: [{ path: file }] });
    expect(terminal.type).toBe("result");
    expect(held.at(-1)).toBe(0);
    expect(heldImages.inUse).toBe(0);
  });

  test("a resume over an unreadable checkpoint runs as a new turn with the chat's images, not without them", async () => {
    // The checkpoint is there but cannot be read: it is dropped and the chat runs as a new turn,
    // so its images are the turn's; skipped as a resume's, the model answered about none.
    await using h = new ChatHarness(AGENTS, vision());
    const c = h.services.store().conversations;
    c.ensureSession("default_user", "s", "a", "hi", new Date());
    c.saveCheckpoint("default_user", "s", `{"turn": not json`, new Date());
    const image = png(6, 6);
    h.llama.script({ content: "seen" });
    const { terminal } = await h.chat(1, {
      session_id: "s",
      input: "look",
      resume: true,
      images: [{ data: b64(image) }],
    });
    expect(terminal.type).toBe("result");
    expect((result(terminal).warnings as Json[]).map((w) => w.code)).toContain("checkpoint_reset");
    expect((userParts(h, 0)[0] as Json[])[1]?.image_url.url).toContain(b64(image));
    expect((h.history("s")[0] as Json).attachments).toHaveLength(1);
  });

  test("a broken-off turn's photo, set aside by a fresh turn, leaves none of its bytes under data_dir", async () => {
    // The user gives up on the interrupted turn and asks something else: its staged photo was
    // never part of the conversation, and goes as a refused turn's does, the log included.
    await using h = new ChatHarness(AGENTS, vision());
    const small = png(3, 3);
    const photo = Buffer.concat([
      small.subarray(0, small.length - 12),
      pngChunk("teXt", Buffer.from("BADGERPIXELS".repeat(100))),
      small.subarray(small.length - 12),
    ]);
    h.llama.script({ content: ["a"], crash_after_chunks: 2 });
    const broken = await h.chat(1, { session_id: "t", input: "look", images: [{ data: b64(photo) }] });
    expect(broken.terminal.type).toBe("error");
    expect(filesHolding(h.dataDir, "BADGERPIXELS").length).toBeGreaterThan(0);
    h.llama.script({ content: "fresh" });
    const { terminal } = await h.chat(2, { session_id: "t", input: "never mind" });
    expect(terminal.type).toBe("result");
    expect(filesHolding(h.dataDir, "BADGERPIXELS")).toEqual([]);
  });
});
