import { homedir } from "node:os";
import { canonicalPath, type ModelFiles } from "../config/choose-model.ts";
import { drives } from "../util/drive-answers.ts";
import { hubCacheDir } from "./hf-cache.ts";
import { resolveModelPath } from "./resolve.ts";

/**
 * A request's path matched to the configured models' files, an `hf:` model's included: its file
 * in the Hugging Face cache, as its llama-server is given it (resolve.ts). A host that names a
 * cached model by the path the `models` listing shows gets that model's one llama-server, not a
 * second of the same file, its memory taken twice (docs/models.md "Several models").
 */
export const modelFiles: ModelFiles = {
  canonical: canonicalPath,
  drives,
  cacheDir: () => hubCacheDir(process.env, process.env.HOME || homedir()),
  // Never asked in the cache: answeringFiles resolves ahead (`cachedAsync`) every reference findModel
  // asks of these files (the request's and the configured `hf:` models'), and answers none
  // while the cache's drive is silent. A synchronous listing here held ping at each such request.
  cached: () => null,
  // Not pulled, or ambiguous: its own load says so; no request's path is it.
  cachedAsync: (hfRef) => resolveModelPath(hfRef).catch(() => null),
};
