import { describe, expect, test } from "bun:test";
import {
  BODY_TEXT_RESERVE_BYTES,
  IMAGE_BODY_BYTES,
  imageBodyBytes,
  MAX_IMAGE_BYTES,
} from "../../src/images/limits.ts";
import { prepareImages } from "../../src/images/prepare.ts";
import { LLAMA_MAX_BODY_BYTES } from "../../src/llama/data-url.ts";
import { coreErrorOfAsync } from "../fixtures/core-error.ts";
import { b64, png } from "../fixtures/images.ts";

// A chat's images together must fit the body llama-server reads (docs/protocol.md#images): its
// cpp-httplib answers a body over 100 MiB with 413, which came back as internal_error, and the
// images stayed staged for a resume that hit it again. The image that crosses is refused first.

const limits = { maxImages: 8, maxPixels: 50_000_000 };

const refusal = coreErrorOfAsync;

describe("the images' share of the request body", () => {
  test("the image that takes the images past the body's budget is refused by name, as too_large", async () => {
    const image = png(16, 16, { seed: 3 });
    const each = imageBodyBytes({ mime: "image/png", bytes: image.length });
    const images = Array.from({ length: 4 }, () => ({ data: b64(image) }));
    // Room for two and a half: the third crosses.
    const maxBodyBytes = Math.floor(each * 2.5);
    const err = await refusal(prepareImages(images, { ...limits, maxBodyBytes }));
    expect(err.code).toBe("invalid_request");
    expect(err.data).toMatchObject({ field: "images[2]", problem: "too_large" });
    expect(err.message).toMatch(/^params\.images\[2\]: .*send fewer or smaller images/);
    expect(await prepareImages(images.slice(0, 2), { ...limits, maxBodyBytes })).toHaveLength(2);
  });

  test("under llama-server's 100 MiB with room for the text: three images of 20 MB a chat, not four", () => {
    expect(LLAMA_MAX_BODY_BYTES).toBe(100 * 1024 * 1024);
    expect(IMAGE_BODY_BYTES + BODY_TEXT_RESERVE_BYTES).toBe(LLAMA_MAX_BODY_BYTES);
    const big = imageBodyBytes({ mime: "image/png", bytes: MAX_IMAGE_BYTES });
    expect(big).toBeGreaterThan((MAX_IMAGE_BYTES * 4) / 3);
    expect(3 * big).toBeLessThanOrEqual(IMAGE_BODY_BYTES);
    expect(4 * big).toBeGreaterThan(IMAGE_BODY_BYTES);
  });
});
