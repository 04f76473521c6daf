import { describe, expect, test } from "bun:test";
import { imageRefusal } from "../../../src/agent/turn/images.ts";
import { LlmError } from "../../../src/llama/errors.ts";

// llama-server's refusals of a request's images, as a chat's (docs/protocol.md#images).

/** transcripts/106b: bytes under an image header its decoder cannot read. */
const undecodable = () =>
  new LlmError("bad_response", "Failed to load image or audio file", {}, 400, "invalid_request_error");

describe("imageRefusal", () => {
  test("an image llama-server cannot decode (106b) names images[0] when the chat sent one", () => {
    const err = imageRefusal(undecodable(), 1);
    expect(err).toMatchObject({ code: "invalid_request", data: { field: "images[0]", problem: "damaged" } });
    expect(err?.message).toStartWith("params.images[0]:");
  });

  test("with several, the answer does not say which: the list is named", () => {
    expect(imageRefusal(undecodable(), 3)?.data).toEqual({ field: "images", problem: "damaged" });
  });

  test("a server without a projector (105) is model_not_vision; other errors are not the images'", () => {
    const noVision = new LlmError("server_error", "image input is not supported by this server", {}, 500);
    expect(imageRefusal(noVision, 1)?.data).toMatchObject({ reason: "model_not_vision" });
    expect(imageRefusal(new LlmError("bad_response", "something else", {}, 400), 1)).toBeUndefined();
  });

  test("a body over what llama-server reads (413, or refused before sending) is too_large, naming the images", () => {
    const tooLarge = new LlmError("bad_response", "too large", { status: 413, problem: "too_large" }, 413);
    const err = imageRefusal(tooLarge, 1);
    expect(err).toMatchObject({
      code: "invalid_request",
      data: { field: "images[0]", problem: "too_large" },
    });
    expect(imageRefusal(tooLarge, 6)?.data).toEqual({ field: "images", problem: "too_large" });
  });
});
