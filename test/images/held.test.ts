import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { heldImages, holdImages } from "../../src/images/held.ts";
import { MAX_IMAGE_BYTES } from "../../src/images/limits.ts";
import { prepareImages } from "../../src/images/prepare.ts";
import { png } from "../fixtures/images.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const live = () => new AbortController().signal;

// A stat on a dead network mount can hang for minutes: the chats whose images come after it in
// the line must not wait as long (docs/protocol.md#images).
test("an image file whose stat never answers holds the most an image may take, and the line goes on", async () => {
  const hung = (path: string) =>
    path === "/mnt/dead/a.png" ? new Promise<{ size: number }>(() => {}) : Promise.resolve({ size: 1000 });
  const options = { stat: hung, statWaitMs: 50 };
  const first = holdImages([{ path: "/mnt/dead/a.png" }], 4, live(), options);
  const second = holdImages([{ path: "/home/me/b.png" }], 4, live(), options);
  const [a, b] = await Promise.all([first, second]);
  expect(a.room).toEqual([MAX_IMAGE_BYTES]);
  expect(b.room).toEqual([1000]);
  a.release();
  b.release();
  expect(heldImages.inUse).toBe(0);
});

test("a stat that fails holds nothing: the read refuses the image, naming it", async () => {
  const failing = () => Promise.reject(new Error("ENOENT"));
  const held = await holdImages([{ path: "/nowhere.png" }], 4, live(), { stat: failing });
  expect(held.room).toEqual([0]);
  held.release();
});

// Some file systems' files (a cloud or FUSE drive's) say 0 bytes in their stat and have more: a
// room of 0 refused such an image as a file that "grew past the 0 bytes it had", as a document
// whose stat says 0 takes the most a document may (documents/add-document.ts).
test("an image file whose stat says 0 bytes holds the most an image may take, and is read", async () => {
  using dir = tmpdir();
  const path = join(dir.path, "zero-stat.png");
  writeFileSync(path, png(2, 2));
  const held = await holdImages([{ path }], 4, live(), { stat: async () => ({ size: 0 }) });
  try {
    expect(held.room).toEqual([MAX_IMAGE_BYTES]);
    const [image] = await prepareImages([{ path }], { maxImages: 4, maxPixels: 1_000_000, room: held.room });
    expect(image?.width).toBe(2);
  } finally {
    held.release();
  }
});

// The most an image may take, held for a file whose stat says 0, was held all the turn long: a chat
// of eight tiny images on such a drive held 160 MB until its answer ended, and the next chat's
// images waited for all of it.
test("a zero-stat image's room past the bytes it read is given back once read: a chat behind goes on", async () => {
  using dir = tmpdir();
  const paths = [join(dir.path, "a.png"), join(dir.path, "b.png")];
  for (const path of paths) writeFileSync(path, png(2, 2));
  const inputs = paths.map((path) => ({ path }));
  const held = await holdImages(inputs, 4, live(), { stat: async () => ({ size: 0 }) });
  const big = Array.from({ length: 12 }, (_, i) => ({ path: `/elsewhere/${i}.png` }));
  let admitted = false;
  const behind = holdImages(big, 12, live(), { stat: async () => ({ size: MAX_IMAGE_BYTES }) }).then((h) => {
    admitted = true;
    return h;
  });
  try {
    await new Promise<void>((r) => setImmediate(r));
    expect(admitted).toBe(false);
    const images = await prepareImages(inputs, { maxImages: 4, maxPixels: 1_000_000, ...held });
    expect(heldImages.inUse).toBe(
      images.reduce((n, image) => n + image.data.length, 0) + 12 * MAX_IMAGE_BYTES,
    );
    await behind;
    expect(admitted).toBe(true);
  } finally {
    held.release();
    (await behind).release();
  }
  expect(heldImages.inUse).toBe(0);
});

// The read a cancel stopped waiting for (images/prepare.ts) goes on, and fills its bytes once the
// drive answers: the chat's room must stay held until then, or a burst of cancelled chats on a
// drive that comes back would hold every image at once, past MAX_HELD_IMAGE_BYTES.
test("a cancelled chat's stuck image read keeps its room until the read ends", async () => {
  const held = await holdImages([{ path: "/offline/shot.png" }], 4, live(), {
    stat: async () => ({ size: 5000 }),
  });
  const cancel = new AbortController();
  const read = Promise.withResolvers<Uint8Array>();
  const called = Promise.withResolvers<void>();
  const checking = prepareImages([{ path: "/offline/shot.png" }], {
    maxImages: 4,
    maxPixels: 1_000_000,
    room: held.room,
    signal: cancel.signal,
    track: held.track,
    readFile: () => {
      called.resolve();
      return read.promise;
    },
  });
  await called.promise;
  cancel.abort(new Error("cancelled by the host"));
  await checking.catch(() => {});
  held.release();
  expect(heldImages.inUse).toBe(5000);
  read.resolve(new Uint8Array(5000));
  await read.promise;
  expect(heldImages.inUse).toBe(0);
});
