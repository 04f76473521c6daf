import { statSync } from "node:fs";
import { settingData } from "../config/model-entry.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import {
  answersFor,
  DRIVE_WAIT_MS,
  type DriveAnswers,
  type DriveOptions,
  statLate,
} from "../util/drive-answers.ts";
import { readGgufHeader, shardPaths } from "./gguf-read.ts";
import { type ModelInfo, modelInfo } from "./model.ts";

/** How long a read waits for the file's stat before its synchronous reads (util/drive-answers.ts). */
export const MODEL_STAT_WAIT_MS = DRIVE_WAIT_MS;

/** The stat and its wait (tests), and where a configured path is resolved. */
export interface MemoOptions extends DriveOptions {
  /**
   * The folder `resolve` reads synchronously to find a configured path (an `hf:` one's cache), or
   * null: its stat is awaited first, as the file's is, for a cache on a dead network mount.
   */
  folderOf?: (configured: string) => string | null;
}

/** Files whose model is kept: a handful of configured models (big arrays are counted, not kept: gguf-scan.ts). */
const MEMO_FILES = 8;

/**
 * The model as the planner sees it, read once per file version: every start, restart and wake
 * plans again, and `initialize` reads it ahead (docs/performance.md "Chat overhead"), so a cold
 * chat does not parse the header on its critical path. A file counts as the same while its
 * size, modification time and inode are; anything else (or a stat that fails) reads it again.
 * `resolve` turns the configured path into the file (an `hf:` path is resolved from the cache
 * by the models floor above, which hands its resolver in); it runs at every read, as a pull
 * may have changed what the path names. Several files are kept (the last MEMO_FILES read): with
 * several models a swap plans the model coming back, whose header was read before
 * (docs/performance.md "Several models").
 */
export class ModelMemo {
  /** By file, least recently read first. */
  private readonly known = new Map<string, { identity: string; info: ModelInfo }>();
  /** Headers parsed so far (what the memo saved is the rest of the reads). */
  parses = 0;

  /** Whether a file's drive answers, asked off the loop before the synchronous reads. */
  private readonly drives: DriveAnswers;

  constructor(
    /** May wait: an `hf:` path's snapshot is listed off the loop (models/resolve.ts). */
    private readonly resolve: (configured: string, key?: string) => string | Promise<string> = (path) => path,
    private readonly options: MemoOptions = {},
  ) {
    this.drives = answersFor(options);
  }

  /** `key` is the config key that holds the path, handed to `resolve` for a refusal to name. */
  async read(configured: string, key?: string): Promise<ModelInfo> {
    const folder = this.options.folderOf?.(configured) ?? null;
    if (folder !== null) await this.answered(folder, key, configured);
    const path = await this.resolve(configured, key);
    await this.answered(path, key);
    const identity = identityOf(path);
    const known = this.known.get(path);
    this.known.delete(path);
    if (identity !== null && known?.identity === identity) {
      this.known.set(path, known);
      return known.info;
    }
    const info = modelInfo(
      await readGgufHeader(path, this.drives).catch((err) => Promise.reject(keyed(err, key))),
    );
    this.parses++;
    if (identity === null) return info;
    this.known.delete(path);
    this.known.set(path, { identity, info: Object.freeze(info) });
    for (const oldest of this.known.keys()) {
      if (this.known.size <= MEMO_FILES) break;
      this.known.delete(oldest);
    }
    return info;
  }

  private answered(path: string, key: string | undefined, configured?: string): Promise<void> {
    return statAnswered(this.drives, path, key, configured);
  }
}

/**
 * `path`'s stat answered (`statLate`), else the model refused: model_missing unreadable, naming
 * `configured` when `path` is the folder it is resolved in (the error names both).
 */
export async function statAnswered(
  answers: DriveAnswers,
  path: string,
  key: string | undefined,
  configured?: string,
): Promise<void> {
  const late = await statLate(answers, path);
  if (!late) return;
  const model = configured ?? path;
  const why = configured === undefined ? late : `its folder ${path}: ${late}`;
  throw keyed(
    new CoreError("model_missing", `model ${model}: unreadable: ${why}`, {
      path: model,
      problem: "unreadable",
    }),
    key,
  );
}

/** A refusal of the file names where its path was set (config key or request field), as an `hf:` one does. */
function keyed(err: unknown, key: string | undefined): unknown {
  if (key === undefined || !isCoreError(err) || err.data?.key !== undefined) return err;
  const named = new CoreError(err.code, err.message, { ...err.data, ...settingData(key) });
  named.stack = err.stack;
  return named;
}

function identityOf(path: string): string | null {
  try {
    return shardPaths(path)
      .map((f) => {
        const st = statSync(f);
        return `${st.size}:${st.mtimeMs}:${st.ino}`;
      })
      .join("|");
  } catch {
    return null;
  }
}
