import { describe, expect, test } from "bun:test";
import { imageRefusal } from "../../../src/agent/turn/images.ts";
import { LlmError } from "../../../src/llama/errors.ts";

// llama-server's refusals of a request's images, as a chat's (docs/protocol.md#images).

/** transcripts/106b: bytes under an image header its decoder cannot read. */
/** Attachment refs with these ids, as a request carries them. */
const refs = (...ids: number[]) => ids.map((id) => ({ id, mime: "image/png", bytes: 100 }));

const undecodable = () =>
  new LlmError("bad_response", "Failed to load image or audio file", {}, 400, "invalid_request_error");

describe("imageRefusal", () => {
  test("an image llama-server cannot decode (106b) names images[0] when the chat sent one", () => {
    const err = imageRefusal(undecodable(), 1, refs(7));
    expect(err).toMatchObject({ code: "invalid_request", data: { field: "images[0]", problem: "damaged" } });
    expect(err?.message).toStartWith("params.images[0]: llama-server could not decode the image");
  });

  test("with several, the answer does not say which: the list is named", () => {
    expect(imageRefusal(undecodable(), 3, refs(7, 8, 9))?.data).toEqual({
      field: "images",
      problem: "damaged",
    });
  });

  test("a server without a projector (105) is model_not_vision; other errors are not the images'", () => {
    const noVision = new LlmError("server_error", "image input is not supported by this server", {}, 500);
    expect(imageRefusal(noVision, 1, refs(7))?.data).toMatchObject({ reason: "model_not_vision" });
    expect(imageRefusal(new LlmError("bad_response", "something else", {}, 400), 1, refs(7))).toBeUndefined();
  });

  test("a body over what llama-server reads (413, or refused before sending) is too_large, naming the images", () => {
    const tooLarge = new LlmError("bad_response", "too large", { status: 413, problem: "too_large" }, 413);
    const err = imageRefusal(tooLarge, 1, refs(7));
    expect(err).toMatchObject({
      code: "invalid_request",
      data: { field: "images[0]", problem: "too_large" },
    });
    expect(imageRefusal(tooLarge, 6, refs(1, 2, 3, 4, 5, 6))?.data).toEqual({
      field: "images",
      problem: "too_large",
    });
  });

  test("a chat that sent no images (a regenerate, a later turn) is told the stored images by id", () => {
    const one = imageRefusal(undecodable(), 0, refs(7));
    expect(one?.data).toEqual({ attachments: [7], problem: "damaged" });
    expect(one?.message).toStartWith("the session's stored image (attachment 7):");
    const tooLarge = new LlmError("bad_response", "too large", { status: 413, problem: "too_large" }, 413);
    expect(imageRefusal(tooLarge, 0, refs(7, 9))?.data).toEqual({
      attachments: [7, 9],
      problem: "too_large",
    });
  });
});
