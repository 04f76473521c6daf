import { describe, expect, spyOn, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateSync } from "node:zlib";
import { decodeBase64Strict } from "../../src/images/base64.ts";
import { readImageHeader } from "../../src/images/format.ts";
import { gifDataOverruns } from "../../src/images/gif-data.ts";
import { jpegScansOver } from "../../src/images/jpeg-data.ts";
import { BASE64_SLICE_CHARS, MAX_IMAGE_BYTES } from "../../src/images/limits.ts";
import { pngImageData } from "../../src/images/png-data.ts";
import { prepareImages } from "../../src/images/prepare.ts";
import { coreErrorOfAsync } from "../fixtures/core-error.ts";
import { b64, bmp, gif, gifBomb, jpegHeader, png, progressiveJpeg, webp } from "../fixtures/images.ts";
import { pingsDuring } from "../fixtures/interleave.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const limits = { maxImages: 8, maxPixels: 50_000_000 };

const refusal = coreErrorOfAsync;

describe("an image's header", () => {
  test("PNG, JPEG, GIF and BMP: the format and size come from the bytes", async () => {
    expect(await readImageHeader(png(64, 32))).toEqual({ ok: true, format: "png", width: 64, height: 32 });
    expect(await readImageHeader(jpegHeader(640, 480))).toEqual({
      ok: true,
      format: "jpeg",
      width: 640,
      height: 480,
    });
    expect(await readImageHeader(gif(32, 16))).toEqual({ ok: true, format: "gif", width: 32, height: 16 });
    expect(await readImageHeader(bmp(5, 3))).toEqual({ ok: true, format: "bmp", width: 5, height: 3 });
  });

  test("an empty file is refused as damaged, not as a format to convert", async () => {
    expect(await readImageHeader(new Uint8Array(0))).toEqual({
      ok: false,
      kind: "damaged",
      problem: "an empty file (0 bytes): there is no image in it",
    });
    // A few bytes that begin no image are still a format the core does not read.
    expect(await readImageHeader(new Uint8Array([0x41, 0x42]))).toMatchObject({
      ok: false,
      kind: "unsupported",
    });
  });

  test("a damaged PNG's refusal names a chunk by its type only when that is one, never quoting other bytes", async () => {
    // After IHDR, a chunk whose length runs past the end and whose "type" is the image's own
    // bytes (a length field gone wrong lands in the pixels): they were quoted into the message.
    const whole = png(16, 16);
    const bad = Buffer.concat([
      whole.subarray(0, 33),
      Buffer.from([0, 0, 0x10, 0, 0x1b, 0x5b, 0xff, 0x07, 1, 2, 3, 4]),
    ]);
    const header = await readImageHeader(bad);
    expect(header).toEqual({
      ok: false,
      kind: "damaged",
      problem: "a truncated PNG: a chunk runs past the end",
    });
    const named = await readImageHeader(whole.subarray(0, 50));
    expect(!named.ok && named.problem).toMatch(/^a truncated PNG: its [A-Za-z]{4} chunk runs past the end$/);
  });

  test("a truncated PNG is damaged wherever it is cut (the chunks are walked to IEND)", async () => {
    const whole = png(16, 16);
    for (const cut of [20, 40, whole.length - 12, whole.length - 1]) {
      const header = await readImageHeader(whole.subarray(0, cut));
      expect(header.ok).toBe(false);
      if (!header.ok) expect(header.kind).toBe("damaged");
    }
  });

  test("20 MB of empty PNG chunks is walked without a string made per chunk (half a second an image)", async () => {
    // 1.75 million zero-length tEXt chunks between IHDR and IDAT: each type was a string made
    // with String.fromCharCode (0.5–0.7 s an image, 8 of them a chat, on the main loop).
    const base = png(4, 4);
    const empty = Buffer.from([0, 0, 0, 0, 0x74, 0x45, 0x58, 0x74, 0, 0, 0, 0]);
    const count = Math.floor((MAX_IMAGE_BYTES - base.length) / empty.length);
    const bytes = Buffer.alloc(base.length + count * empty.length);
    bytes.set(base.subarray(0, 33));
    for (let i = 0; i < count; i++) bytes.set(empty, 33 + i * empty.length);
    bytes.set(base.subarray(33), 33 + count * empty.length);
    // Counted, not timed: no chunk's type is made a string, the way it would be named in a refusal.
    const strings = [spyOn(String, "fromCharCode"), spyOn(TextDecoder.prototype, "decode")];
    let made: number[];
    const started = performance.now();
    try {
      expect(await readImageHeader(bytes)).toEqual({ ok: true, format: "png", width: 4, height: 4 });
    } finally {
      made = strings.map((s) => s.mock.calls.length);
      for (const s of strings) s.mockRestore();
    }
    expect(made).toEqual([0, 0]);
    // A backstop a loaded machine never reaches: a few milliseconds here.
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test("a JPEG's scans are counted to its EOI, through stray bytes and stuffed data, not past it", async () => {
    const scans = (n: number) => progressiveJpeg(64, 48, n).subarray(0, -2); // without EOI
    const eoi = Buffer.from([0xff, 0xd9]);
    // A trailer after EOI (a motion photo's video) may hold any bytes, scan markers included.
    const trailer = Buffer.concat(
      Array.from({ length: 200 }, () => Buffer.from([0xff, 0xda, 0, 8, 1, 1, 0, 1, 63, 0])),
    );
    expect(await jpegScansOver(Buffer.concat([scans(100), eoi, trailer]))).toBe(false);
    // stb_image skips bytes between segments: a stray one does not hide the scans after it.
    const many = progressiveJpeg(64, 48, 101);
    const second = many.indexOf(Buffer.from([0xff, 0xda]), many.indexOf(Buffer.from([0xff, 0xda])) + 2);
    const stray = Buffer.concat([
      many.subarray(0, second),
      Buffer.from([0x42, 0xff, 0x00, 0x17]),
      many.subarray(second),
    ]);
    expect(await jpegScansOver(stray)).toBe(true);
  });

  test("a header's long walk gives the loop back: a PNG's empty chunks, a JPEG's fill bytes or empty segments", async () => {
    // 8 MB each (20 MB held the loop ~40 ms as PNG chunks, ~100 ms as JPEG fill bytes).
    const base = png(4, 4);
    const chunk = Buffer.from([0, 0, 0, 0, 0x74, 0x45, 0x58, 0x74, 0, 0, 0, 0]);
    const chunks = Buffer.alloc(Math.floor((8 * 1024 * 1024) / chunk.length) * chunk.length);
    for (let i = 0; i < chunks.length; i += chunk.length) chunks.set(chunk, i);
    const jpeg = jpegHeader(64, 48);
    const segments = Buffer.alloc(8 * 1024 * 1024);
    for (let i = 0; i < segments.length; i += 4) segments.set([0xff, 0xe1, 0, 2], i);
    const cases = [
      [Buffer.concat([base.subarray(0, 33), chunks, base.subarray(33)]), "png"],
      [Buffer.concat([jpeg.subarray(0, 20), Buffer.alloc(8 * 1024 * 1024, 0xff), jpeg.subarray(20)]), "jpeg"],
      [Buffer.concat([jpeg.subarray(0, 20), segments, jpeg.subarray(20)]), "jpeg"],
    ] as const;
    for (const [bytes, format] of cases) {
      const { value, pings } = await pingsDuring(() => readImageHeader(bytes));
      expect(value).toMatchObject({ ok: true, format });
      expect(pings).toBeGreaterThan(0);
    }
  });

  test("a PNG's image data in 600,000 one-byte IDAT chunks is joined in slices: the loop turns", async () => {
    // Each one-byte chunk walked twice (sized, then copied) in one go: 20 MB of them held the
    // loop ~190 ms before zlib was even asked.
    const stream = deflateSync(Buffer.alloc(600_000), { level: 0 });
    const chunks = Buffer.alloc(stream.length * 13);
    for (let i = 0; i < stream.length; i++)
      chunks.set([0, 0, 0, 1, 0x49, 0x44, 0x41, 0x54, stream[i] as number, 0, 0, 0, 0], i * 13);
    const end = Buffer.from([0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0, 0, 0, 0]);
    const bytes = Buffer.concat([png(4, 4).subarray(0, 33), chunks, end]);
    const { value, pings } = await pingsDuring(async () => pngImageData(bytes));
    expect(value.equals(stream)).toBe(true);
    expect(pings).toBeGreaterThan(0);
  });

  test("a GIF's extensions before its first frame are walked in slices: the loop turns inside them", async () => {
    // 8 MB of a comment's one-byte sub-blocks between the colour table and the first frame (4
    // million steps, walked whole between two turns of the loop: ~100 ms for 20 MB).
    const small = gif(1, 1);
    const subBlocks = Buffer.alloc(8 * 1024 * 1024);
    for (let i = 0; i < subBlocks.length; i += 2) subBlocks.set([1, 0x41], i);
    const comment = Buffer.concat([Buffer.from([0x21, 0xfe]), subBlocks, Buffer.from([0])]);
    const big = Buffer.concat([small.subarray(0, 19), comment, small.subarray(19)]);
    const { value, pings } = await pingsDuring(() => gifDataOverruns(big));
    expect(value).toBe(false);
    expect(pings).toBeGreaterThan(0);
    // The frame after them is still found: a bomb there is still refused.
    const bomb = gifBomb(2);
    const bombed = Buffer.concat([bomb.subarray(0, 19), comment, bomb.subarray(19)]);
    expect(await gifDataOverruns(bombed)).toBe(true);
  });

  test("a JPEG's scans are counted in slices: the loop turns inside a large one", async () => {
    // 8 MB of stuffed 0xFF 0x00 pairs (the walk's worst case) inside one scan.
    const jpeg = progressiveJpeg(64, 48, 1);
    const sos = jpeg.indexOf(Buffer.from([0xff, 0xda]));
    const stuffed = Buffer.alloc(8 * 1024 * 1024);
    for (let i = 0; i < stuffed.length; i += 2) stuffed[i] = 0xff;
    const big = Buffer.concat([jpeg.subarray(0, sos + 12), stuffed, jpeg.subarray(sos + 12)]);
    const { value, pings } = await pingsDuring(() => jpegScansOver(big));
    expect(value).toBe(false);
    expect(pings).toBeGreaterThan(0);
  });

  test("a JPEG's scans are counted in slices through long runs without a marker too", async () => {
    // 8 MB with no 0xFF (entropy data may hold few), then 8 MB of fill 0xFF bytes: each was walked
    // whole between two turns of the loop, the slices counted only from marker to marker.
    const jpeg = progressiveJpeg(64, 48, 1);
    const sos = jpeg.indexOf(Buffer.from([0xff, 0xda]));
    for (const run of [Buffer.alloc(8 * 1024 * 1024, 0x11), Buffer.alloc(8 * 1024 * 1024, 0xff)]) {
      const big = Buffer.concat([jpeg.subarray(0, sos + 12), run, jpeg.subarray(sos + 12)]);
      const { value, pings } = await pingsDuring(() => jpegScansOver(big));
      expect(value).toBe(false);
      expect(pings).toBeGreaterThan(0);
    }
  });

  test("a marker right at a slice's end is read as one", async () => {
    // The EOI's 0xFF the last byte of the first 2 MiB slice, its 0xD9 the first of the next:
    // taken for a stray byte, the trailer's scan markers after it were counted.
    const head = progressiveJpeg(64, 48, 1).subarray(0, -2);
    const fill = Buffer.alloc(2 * 1024 * 1024 - 1 - head.length, 0x11);
    const trailer = Buffer.concat(
      Array.from({ length: 200 }, () => Buffer.from([0xff, 0xda, 0, 8, 1, 1, 0, 1, 63, 0])),
    );
    const jpeg = Buffer.concat([head, fill, Buffer.from([0xff, 0xd9]), trailer]);
    expect(jpeg[2 * 1024 * 1024]).toBe(0xd9);
    expect(await jpegScansOver(jpeg)).toBe(false);
  });

  test("junk bytes between segments before the frame header are skipped, as stb_image skips them", async () => {
    // A camera's padding after APP0 (stb_image's decode_jpeg_header scans past bytes that are no marker).
    const whole = jpegHeader(640, 480);
    const junk = Buffer.from([0x00, 0x00, 0x12, 0x34, 0x00]);
    const padded = Buffer.concat([whole.subarray(0, 20), junk, whole.subarray(20)]);
    expect(padded.subarray(20 + junk.length, 22 + junk.length)).toEqual(Buffer.from([0xff, 0xc0]));
    expect(await readImageHeader(padded)).toEqual({ ok: true, format: "jpeg", width: 640, height: 480 });
    expect((await prepareImages([{ data: b64(padded) }], limits))[0]?.width).toBe(640);
    // Junk to the file's end: no frame header, damaged; the whole 20 MB walked.
    const endless = Buffer.concat([whole.subarray(0, 20), Buffer.alloc(MAX_IMAGE_BYTES - 20, 0x11)]);
    expect(await readImageHeader(endless)).toMatchObject({ ok: false, kind: "damaged" });
  });

  test("a JPEG llama-server's decoder cannot read (lossless, arithmetic, 12-bit) is unsupported, not sent", async () => {
    // stb_image reads SOF0–SOF2 of 8-bit samples only; anything else came back from llama-server as a 400.
    const lossless = jpegHeader(64, 48);
    lossless[21] = 0xc3;
    expect(lossless.subarray(20, 22)).toEqual(Buffer.from([0xff, 0xc3]));
    expect(await readImageHeader(lossless)).toMatchObject({ ok: false, kind: "unsupported" });
    const twelveBit = jpegHeader(64, 48);
    twelveBit[24] = 12;
    expect(await readImageHeader(twelveBit)).toMatchObject({ ok: false, kind: "unsupported" });
    const extended = jpegHeader(64, 48);
    extended[21] = 0xc1;
    expect(await readImageHeader(extended)).toMatchObject({ ok: true, width: 64, height: 48 });
  });

  test("a JPEG that ends before its frame header is damaged", async () => {
    const header = await readImageHeader(jpegHeader(10, 10).subarray(0, 12));
    expect(header).toMatchObject({ ok: false, kind: "damaged" });
  });
});

describe("prepareImages", () => {
  test("base64 and a path are read, the mime comes from the bytes", async () => {
    using dir = tmpdir();
    const file = join(dir.path, "photo.jpg"); // a PNG under a JPEG name
    writeFileSync(file, png(8, 8));
    const images = await prepareImages([{ data: b64(gif()), mime: "image/png" }, { path: file }], limits);
    expect(images.map((i) => [i.mime, i.width, i.height])).toEqual([
      ["image/gif", 1, 1],
      ["image/png", 8, 8],
    ]);
    expect(Buffer.from(images[1]!.data).equals(png(8, 8))).toBe(true);
  });

  test("a PNG whose data's only fault is its checksum is sent: llama-server's stb_image never checks it", async () => {
    const images = await prepareImages([{ data: b64(png(64, 64, { adler: 1 })) }], limits);
    expect(images.map((i) => [i.width, i.height])).toEqual([[64, 64]]);
  });

  test("a progressive JPEG of up to 100 scans is sent (libjpeg's standard progression writes 10)", async () => {
    const images = await prepareImages([{ data: b64(progressiveJpeg(64, 48, 100)) }], limits);
    expect(images.map((i) => [i.format, i.width, i.height])).toEqual([["jpeg", 64, 48]]);
  });

  const cases: [string, () => unknown, string, RegExp][] = [
    ["bad base64 (106)", () => ({ data: "not base64 at all!" }), "bad_base64", /not base64/],
    ["base64 with a wrong length", () => ({ data: "iVBORw0KGgo" }), "bad_base64", /multiple of 4/],
    [
      "garbage bytes under an image mime (106b)",
      () => ({ data: b64(Buffer.from("hello world, no image here")), mime: "image/png" }),
      "unsupported_format",
      /not a PNG, JPEG, GIF or BMP/,
    ],
    [
      "WebP, which llama-server cannot read without ffmpeg (106d)",
      () => ({ data: b64(webp()) }),
      "unsupported_format",
      /WebP.*ffmpeg/,
    ],
    ["a truncated PNG", () => ({ data: b64(png(16, 16).subarray(0, 50)) }), "damaged", /truncated PNG/],
    [
      "a PNG declaring 100,000 × 100,000 pixels (a bomb)",
      () => ({ data: b64(png(1, 1, { declare: { width: 100_000, height: 100_000 } })) }),
      "too_many_pixels",
      /100000×100000/,
    ],
    [
      "a PNG declaring 1 × 1 whose data inflates to 4,000 × 4,000 (a bomb stb_image inflates whole)",
      () => ({ data: b64(png(4000, 4000, { declare: { width: 1, height: 1 } })) }),
      "damaged",
      /inflates past the 1×1 pixels its header declares/,
    ],
    [
      // 0x88 0x1c: a 64 KiB window, which zlib refuses at once (nothing inflated, nothing
      // counted) and stb_image never reads: it inflated such a 510 KB file to 512 MB and gave 1×1.
      "a PNG declaring 1 × 1 whose data zlib refuses at its header and stb_image inflates to 4,000 × 4,000",
      () => ({ data: b64(png(4000, 4000, { declare: { width: 1, height: 1 }, zlib: [0x88, 0x1c] })) }),
      "damaged",
      /invalid window size/,
    ],
    [
      // 200 such scans over 7000 × 7000 took stb_image 5.9 s of CPU; 20 MB of them, hours.
      "a progressive JPEG of 101 scans, each a pass of llama-server's decoder over every block",
      () => ({ data: b64(progressiveJpeg(64, 48, 101)) }),
      "damaged",
      /over 100 scans/,
    ],
    [
      // stb_image walks a code's whole string for each: 1.2 MB of this took it 7 s of CPU.
      "a 1 × 1 GIF whose data names a 4,090-pixel code thousands of times",
      () => ({ data: b64(gifBomb(2)) }),
      "damaged",
      /GIF whose first frame's data decodes past its 1×1 pixels/,
    ],
    ["an http: URL as data (107)", () => ({ data: "http://example.com/cat.png" }), "url", /never followed/],
    [
      "a data: URL as data",
      () => ({ data: `data:image/png;base64,${b64(png(1, 1))}` }),
      "url",
      /never followed/,
    ],
    ["a file: URL as path (107b)", () => ({ path: "file:///etc/passwd" }), "url", /never followed/],
    ["an https: URL as path", () => ({ path: "https://example.com/a.png" }), "url", /never followed/],
    ["a relative path", () => ({ path: "cat.png" }), "unreadable", /absolute/],
    ["neither data nor path", () => ({ mime: "image/png" }), "unreadable", /exactly one/],
    ["both data and path", () => ({ data: b64(png(1, 1)), path: "/x.png" }), "unreadable", /exactly one/],
    [
      "a mime that is no image (106e)",
      () => ({ data: b64(png(1, 1)), mime: "text/plain" }),
      "unsupported_format",
      /not an image type/,
    ],
  ];
  for (const [name, input, reason, message] of cases) {
    test(`refused: ${name}, naming images[1]`, async () => {
      const err = await refusal(prepareImages([{ data: b64(png(2, 2)) }, input() as never], limits));
      expect(err.code).toBe("invalid_request");
      expect(err.data).toMatchObject({ field: "images[1]", problem: reason });
      expect(err.message).toMatch(message);
    });
  }

  test("more than app.max_images is refused before any is read", async () => {
    const err = await refusal(
      prepareImages(
        Array.from({ length: 3 }, () => ({ path: "/nonexistent" })),
        { ...limits, maxImages: 2 },
      ),
    );
    expect(err.data).toMatchObject({ field: "images[2]", problem: "too_many_images" });
    expect(err.message).toMatch(/app\.max_images \(2\)/);
  });

  test("app.max_image_pixels is the config's", async () => {
    const err = await refusal(prepareImages([{ data: b64(png(20, 20)) }], { ...limits, maxPixels: 399 }));
    expect(err.data).toMatchObject({ field: "images[0]", problem: "too_many_pixels" });
    expect((await prepareImages([{ data: b64(png(20, 20)) }], { ...limits, maxPixels: 400 })).length).toBe(1);
  });

  test("over 20 MB: base64 refused by its length, a file by stat before it is read", async () => {
    using dir = tmpdir();
    const big = join(dir.path, "big.png");
    writeFileSync(big, Buffer.alloc(MAX_IMAGE_BYTES + 1));
    expect((await refusal(prepareImages([{ path: big }], limits))).data).toMatchObject({
      problem: "too_large",
    });
    const text = "A".repeat(Math.ceil(MAX_IMAGE_BYTES / 3) * 4 + 4);
    expect((await refusal(prepareImages([{ data: text }], limits))).data).toMatchObject({
      problem: "too_large",
    });
  });

  test("a FIFO, a directory, a missing file and an unreadable one are refused, and a FIFO never blocks", async () => {
    using dir = tmpdir();
    const fifo = join(dir.path, "pipe.png");
    Bun.spawnSync(["mkfifo", fifo]);
    const folder = join(dir.path, "folder.png");
    mkdirSync(folder);
    const locked = join(dir.path, "locked.png");
    writeFileSync(locked, png(1, 1));
    chmodSync(locked, 0);
    const expectations: [string, RegExp][] = [
      [fifo, /a FIFO/],
      [folder, /a directory/],
      [join(dir.path, "none.png"), /no such file/],
    ];
    if (process.getuid?.() !== 0) expectations.push([locked, /permission denied/]);
    for (const [path, message] of expectations) {
      const err = await refusal(prepareImages([{ path }], limits));
      expect(err.data).toMatchObject({ field: "images[0]", problem: "unreadable" });
      expect(err.message).toMatch(message);
    }
  });

  test("a large base64 text is checked in slices: a ping's timer runs meanwhile", async () => {
    // A PNG with 12 MB after its IEND: the whole text is checked, the PNG read up to IEND.
    const bulk = b64(Buffer.concat([png(1, 1), Buffer.alloc(12 * 1024 * 1024)]));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    await prepareImages([{ data: bulk }], limits);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(0);
  });

  test("a large base64 text is decoded in slices too, each within a turn of the loop", async () => {
    // Decoded in one call once checked: 20 MB of image (a host's raised stdio.max_line_bytes)
    // held the loop ~40 ms. Each decode call is asked of one slice at most, the loop turning between.
    const image = Buffer.alloc(3 * BASE64_SLICE_CHARS + 5, 0x5a);
    const from = spyOn(Buffer, "from");
    const write = spyOn(Buffer.prototype, "write");
    const text = image.toString("base64");
    let decoded: Awaited<ReturnType<typeof decodeBase64Strict>>;
    let lengths: number[];
    try {
      decoded = await decodeBase64Strict(text);
    } finally {
      lengths = [...from.mock.calls, ...write.mock.calls]
        .filter((c) => typeof c[0] === "string")
        .map((c) => (c[0] as string).length);
      from.mockRestore();
      write.mockRestore();
    }
    expect(decoded.ok && decoded.bytes.equals(image)).toBe(true);
    expect(lengths.length).toBeGreaterThan(0);
    expect(Math.max(...lengths)).toBeLessThanOrEqual(BASE64_SLICE_CHARS);
  });
});

// A `path` on a network or cloud drive gone offline: its read may never end (a FUSE mount, a
// placeholder the OS fetches on open). The chat's cancel must end the check, not wait for it.
describe("an image read that never ends", () => {
  test("a cancel ends the check within the loop's turn", async () => {
    const cancel = new AbortController();
    const called = Promise.withResolvers<void>();
    const checking = prepareImages([{ path: "/offline/shot.png" }], {
      ...limits,
      signal: cancel.signal,
      readFile: () => {
        called.resolve();
        return new Promise<never>(() => {});
      },
    });
    await called.promise;
    const reason = new Error("cancelled by the host");
    cancel.abort(reason);
    const turn = new Promise((resolve) => setImmediate(() => resolve("still waiting")));
    expect(await Promise.race([checking.catch((err: unknown) => err), turn])).toBe(reason);
  });
});
