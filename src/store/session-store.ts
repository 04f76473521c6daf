import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { Warning, WarningCode } from "../protocol/chat.ts";
import { CoreError } from "../protocol/errors.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateTree } from "../util/private-fs.ts";
import { removeStaleTemps, type StagedWrite, stageJsonAtomic, writeJsonAtomic } from "./atomic.ts";
import { type ChatMessage, ChatMessageSchema } from "./chat-messages.ts";
import { type Checkpoint, CheckpointSchema } from "./checkpoint.ts";
import { moveAside } from "./set-aside.ts";

export const HistorySchema = z.object({
  version: z.literal(1),
  messages: z.array(ChatMessageSchema),
});

export { type Checkpoint, CheckpointSchema };

/**
 * One session's files under data_dir/users/<user>/sessions/<session>/. Ids were validated by
 * SafeIdSchema, so they are plain path segments. Every write is atomic; a file that does not
 * parse is renamed aside (`<name>.corrupt-<time>`), never deleted, and reported as a warning.
 * Folders are owner-only (0700), files 0600: the folder names are user and session ids.
 */
export class SessionStore {
  readonly dir: string;
  private dirReady = false;
  /** The checkpoint written by stageCheckpoint and not yet in place. */
  private staged: StagedWrite | undefined;

  constructor(
    private readonly dataDir: string,
    readonly userId: string,
    readonly sessionId: string,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.dir = join(dataDir, "users", userId, "sessions", sessionId);
  }

  get historyPath(): string {
    return join(this.dir, "history.json");
  }

  get checkpointPath(): string {
    return join(this.dir, "checkpoint.json");
  }

  loadHistory(warnings: Warning[]): ChatMessage[] {
    // Loaded first in every turn, under the session's lock: no write here is in progress.
    removeStaleTemps(this.dir);
    const value = this.readJson(
      this.historyPath,
      HistorySchema,
      "history_reset",
      "session history",
      warnings,
    );
    return value?.messages ?? [];
  }

  saveHistory(messages: ChatMessage[]): void {
    this.commitStaged();
    this.ensureDir();
    writeJsonAtomic(this.historyPath, { version: 1, messages });
  }

  loadCheckpoint(warnings: Warning[]): Checkpoint | undefined {
    return this.readJson(
      this.checkpointPath,
      CheckpointSchema,
      "checkpoint_reset",
      "turn checkpoint",
      warnings,
    );
  }

  saveCheckpoint(cp: Omit<Checkpoint, "version" | "updated_at">): void {
    this.staged?.discard(); // superseded
    this.staged = undefined;
    this.ensureDir();
    writeJsonAtomic(this.checkpointPath, checkpointFile(cp, this.now()));
  }

  /**
   * Writes the checkpoint's bytes now (a full or read-only folder fails here) and leaves the
   * fsyncs and the rename for `commitStaged()` (atomic.ts stageFileAtomic). A later write of the
   * checkpoint supersedes it; a write of the history commits it first, so writes land in order.
   */
  stageCheckpoint(cp: Omit<Checkpoint, "version" | "updated_at">): void {
    this.commitStaged();
    this.ensureDir();
    this.staged = stageJsonAtomic(this.checkpointPath, checkpointFile(cp, this.now()));
  }

  /** Puts a staged checkpoint in place (nothing when none is staged). */
  commitStaged(): void {
    const staged = this.staged;
    this.staged = undefined;
    staged?.commit();
  }

  clearCheckpoint(): void {
    this.staged?.discard(); // superseded
    this.staged = undefined;
    rmSync(this.checkpointPath, { force: true });
  }

  /** Once per store: creates the session's folders 0700, tightening ones an older version made 0755. */
  private ensureDir(): void {
    if (this.dirReady) return;
    ensurePrivateTree(this.dataDir, "users", this.userId, "sessions", this.sessionId);
    this.dirReady = true;
  }

  private readJson<T>(
    path: string,
    schema: z.ZodType<T>,
    code: WarningCode,
    what: string,
    warnings: Warning[],
  ): T | undefined {
    if (!existsSync(path)) return undefined;
    let problem = "unreadable";
    let text: string | undefined;
    try {
      text = readFileSync(path, "utf8");
    } catch (err) {
      // A folder in its place, or no permission: still moved aside so the session can go on.
      problem = `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
    }
    if (text !== undefined) {
      try {
        const parsed = schema.safeParse(JSON.parse(text));
        if (parsed.success) return parsed.data;
        const issue = parsed.error.issues[0];
        problem = `unexpected shape at '${issue?.path.join(".") ?? ""}': ${issue?.message ?? "invalid"}`;
      } catch (err) {
        problem = text.length === 0 ? "empty file" : `not valid JSON (${(err as Error).message})`;
      }
    }
    let aside: string;
    try {
      aside = moveAside(path, this.now());
    } catch (err) {
      // Writing over it would destroy what could not be read; stop instead.
      throw new CoreError(
        "internal_error",
        `the ${what} ${path} is unreadable (${problem}) and could not be moved aside: ${(err as Error).message}`,
        { path },
      );
    }
    logger.warn(`${what} ${path} was unreadable (${problem}); moved to ${aside}`);
    warnings.push({
      code,
      message: `the ${what} could not be read (${problem}); it was moved aside to ${aside} and started afresh`,
    });
    return undefined;
  }
}

function checkpointFile(cp: Omit<Checkpoint, "version" | "updated_at">, now: Date): Checkpoint {
  return { version: 1, ...cp, updated_at: now.toISOString() };
}
