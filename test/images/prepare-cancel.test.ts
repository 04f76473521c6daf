import { expect, test } from "bun:test";
import { prepareImages } from "../../src/images/prepare.ts";
import { b64, png } from "../fixtures/images.ts";

// A chat cancelled while its image is checked: the PNG's data check inflates the whole image
// (0.5 s here for 7000×7000 RGB, seconds for a 16-bit one at app.max_image_pixels) off the loop,
// and the chat's cancelled answer waited for it all. The check stops at the cancel.
test("a cancel during a PNG's data check ends the check, not after the whole image is inflated", async () => {
  const image = png(7000, 7000);
  const cancel = new AbortController();
  const prepared = prepareImages([{ data: b64(image) }], {
    maxImages: 4,
    maxPixels: 50_000_000,
    signal: cancel.signal,
  });
  // The header and the data walks go on in later turns of the loop: the cancel lands during them.
  cancel.abort(new Error("cancelled by the host"));
  await expect(prepared).rejects.toThrow("cancelled by the host");
});
