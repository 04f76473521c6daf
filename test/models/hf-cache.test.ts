import { describe, expect, test } from "bun:test";
import {
  blobPath,
  hubCacheDir,
  hubEndpoint,
  incompletePath,
  isOffline,
  refPath,
  repoFolderName,
  snapshotPath,
  tokenFile,
} from "../../src/models/hf-cache.ts";

// The layout huggingface_hub documents for its cache ("Manage huggingface_hub cache-system"):
// models--org--name/{blobs,snapshots/<commit>,refs/<revision>}, HF_HUB_CACHE > HF_HOME/hub >
// XDG_CACHE_HOME/huggingface/hub > ~/.cache/huggingface/hub.
describe("the Hugging Face cache layout", () => {
  test("the cache folder follows HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, then ~/.cache", () => {
    expect(hubCacheDir({ HF_HUB_CACHE: "/c", HF_HOME: "/h" }, "/home/u")).toBe("/c");
    expect(hubCacheDir({ HF_HOME: "/h", XDG_CACHE_HOME: "/x" }, "/home/u")).toBe("/h/hub");
    expect(hubCacheDir({ XDG_CACHE_HOME: "/x" }, "/home/u")).toBe("/x/huggingface/hub");
    expect(hubCacheDir({}, "/home/u")).toBe("/home/u/.cache/huggingface/hub");
    expect(tokenFile({}, "/home/u")).toBe("/home/u/.cache/huggingface/token");
    expect(tokenFile({ HF_TOKEN_PATH: "/t" }, "/home/u")).toBe("/t");
  });

  test("repo folders, blobs, snapshots and refs", () => {
    expect(repoFolderName("org/name")).toBe("models--org--name");
    expect(blobPath("/c", "org/m", "ab12")).toBe("/c/models--org--m/blobs/ab12");
    expect(incompletePath("/c", "org/m", "ab12")).toBe("/c/models--org--m/blobs/ab12.incomplete");
    expect(snapshotPath("/c", "org/m", "deadbeef", "q/m-Q4_K_M.gguf")).toBe(
      "/c/models--org--m/snapshots/deadbeef/q/m-Q4_K_M.gguf",
    );
    expect(refPath("/c", "org/m", "main")).toBe("/c/models--org--m/refs/main");
  });

  test("offline and endpoint switches", () => {
    expect(isOffline({ HF_HUB_OFFLINE: "1" })).toBe(true);
    expect(isOffline({ HF_HUB_OFFLINE: "0" })).toBe(false);
    expect(isOffline({})).toBe(false);
    expect(hubEndpoint({})).toBe("https://huggingface.co");
    expect(hubEndpoint({ HF_ENDPOINT: "http://127.0.0.1:9/" })).toBe("http://127.0.0.1:9");
  });
});
