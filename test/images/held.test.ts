import { expect, test } from "bun:test";
import { heldImages, holdImages } from "../../src/images/held.ts";
import { MAX_IMAGE_BYTES } from "../../src/images/limits.ts";

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
