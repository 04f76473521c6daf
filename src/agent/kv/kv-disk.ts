import { createHash, randomBytes } from "node:crypto";
import { chmodSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { writeJsonAtomic } from "../../store/atomic.ts";
import { logger } from "../../util/logger.ts";
import { ensurePrivateDir, PRIVATE_FILE_MODE } from "../../util/private-fs.ts";
import { type PromptRecord, PromptRecordSchema } from "./prompt-record.ts";

/**
 * The sessions' saved KV state under data_dir/kv (docs/agent.md#prompt-reuse), one pair of files
 * per session: `<name>.bin`, the slot as llama-server saved it (`--slot-save-path` is this folder),
 * and `<name>.json`, whose session it is, the fingerprint it is valid for, its size and when it was
 * last used, and the session's prompt record. llama-server writes a save under a temporary name,
 * which is renamed into place only once it is whole: a save cut short (the server killed, a full
 * disk) leaves the last good file. Files are 0600 in a 0700 folder. All sessions' files together
 * stay within `llama.kv_disk_bytes`, the least recently used going first.
 *
 * Another core may share the folder (two app windows on one data_dir): each renames whole
 * files into place, so a reader sees an old file or a new one; a file the other core removed
 * fails its restore, which the turn survives by processing its prompt.
 */

const SidecarSchema = z.object({
  version: z.literal(1),
  user_id: z.string(),
  session_id: z.string(),
  fingerprint: z.string(),
  tokens: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  saved_at: z.number(),
  used_at: z.number(),
  prompt: PromptRecordSchema,
  /** Sessions and files the saved tokens hold passages of (its memory notes). */
  note_sources: z.array(z.string()),
});
export type KvEntry = z.infer<typeof SidecarSchema>;

/** A temporary file older than this has no save left waiting for it. */
const STALE_TEMP_MS = 10 * 60_000;

export interface KvUse {
  bytes: number;
  files: number;
}

export class KvDisk {
  private use: KvUse | undefined;

  constructor(
    readonly dir: string,
    readonly budgetBytes: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The session's file name, without extension: a bare name, as llama-server takes it. */
  nameOf(userId: string, sessionId: string): string {
    return `s-${createHash("sha256").update(`${userId}\0${sessionId}`).digest("hex").slice(0, 32)}`;
  }

  /** A name for llama-server to save under before the file is whole. */
  tempName(name: string): string {
    return `${name}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  }

  /** The session's saved state, if it has one of the current shape (a file of another is dropped). */
  entry(userId: string, sessionId: string): KvEntry | undefined {
    const name = this.nameOf(userId, sessionId);
    const entry = this.readSidecar(name);
    if (!entry || entry.user_id !== userId || entry.session_id !== sessionId) return undefined;
    return entry;
  }

  /** Whether the state file of `name` is there (another core may have removed it). */
  hasState(name: string): boolean {
    try {
      return statSync(this.binOf(name)).isFile();
    } catch {
      return false;
    }
  }

  /**
   * A save llama-server finished under `temp`: moved into place, made owner-only, described,
   * and the budget kept. False when it could not be (the temporary file is removed then).
   */
  commit(temp: string, entry: KvEntry): boolean {
    const name = this.nameOf(entry.user_id, entry.session_id);
    try {
      chmodSync(join(this.dir, temp), PRIVATE_FILE_MODE);
      // Described first: a state file without its sidecar is never restored.
      writeJsonAtomic(this.sidecarOf(name), entry);
      renameSync(join(this.dir, temp), this.binOf(name));
    } catch (err) {
      logger.warn(`the KV state of session ${entry.session_id} could not be kept: ${(err as Error).message}`);
      rmSync(join(this.dir, temp), { force: true });
      return false;
    }
    this.use = undefined;
    this.keepBudget(name);
    return true;
  }

  /** The saved state was restored: it is the most recently used. */
  touch(entry: KvEntry): void {
    try {
      writeJsonAtomic(this.sidecarOf(this.nameOf(entry.user_id, entry.session_id)), {
        ...entry,
        used_at: this.now(),
      });
    } catch {
      // Only its place in the eviction order is lost.
    }
  }

  /** Drops what llama-server left under a temporary name (a save that failed or was not kept). */
  discard(temp: string): void {
    rmSync(join(this.dir, temp), { force: true });
  }

  /** Drops a session's files (a restore that failed, another fingerprint, the session deleted). */
  remove(name: string): void {
    rmSync(this.binOf(name), { force: true });
    rmSync(this.sidecarOf(name), { force: true });
    this.use = undefined;
  }

  /**
   * A session erased (`sessions.delete`): its files, and those of the user's other sessions
   * whose saved tokens hold passages of it (memory notes), so nothing of it stays on disk.
   */
  removeSession(userId: string, sessionId: string): void {
    const source = `session:${sessionId}`;
    for (const { name, entry } of this.entries()) {
      if (entry.user_id !== userId) continue;
      if (entry.session_id === sessionId || entry.note_sources.includes(source)) this.remove(name);
    }
    this.remove(this.nameOf(userId, sessionId));
  }

  /** Every file of a user (`users.delete`). */
  removeUser(userId: string): void {
    for (const { name, entry } of this.entries()) if (entry.user_id === userId) this.remove(name);
  }

  /** What the saved states take now (`status`), counted once and kept up to date by this core. */
  usage(): KvUse {
    if (this.use) return this.use;
    let bytes = 0;
    let files = 0;
    for (const f of this.listing()) {
      if (!f.endsWith(".bin") && !f.endsWith(".json")) continue;
      try {
        bytes += statSync(join(this.dir, f)).size;
        if (f.endsWith(".bin")) files++;
      } catch {}
    }
    this.use = { bytes, files };
    return this.use;
  }

  /** Removes what no save waits for any more: temporary files of saves that never finished. */
  sweep(): void {
    ensurePrivateDir(this.dir);
    for (const f of this.listing()) {
      if (!f.endsWith(".tmp")) continue;
      try {
        if (this.now() - statSync(join(this.dir, f)).mtimeMs > STALE_TEMP_MS) rmSync(join(this.dir, f));
      } catch {}
    }
  }

  /** The least recently used go until the whole fits; `keep` (just saved) goes only if it alone is too big. */
  private keepBudget(keep: string): void {
    const all = this.entries().sort((a, b) => a.entry.used_at - b.entry.used_at);
    let total = this.usage().bytes;
    for (const { name } of all) {
      if (total <= this.budgetBytes) break;
      if (name === keep) continue;
      total -= this.sizeOf(name);
      this.remove(name);
    }
    if (total > this.budgetBytes) this.remove(keep);
  }

  private sizeOf(name: string): number {
    let n = 0;
    for (const p of [this.binOf(name), this.sidecarOf(name)]) {
      try {
        n += statSync(p).size;
      } catch {}
    }
    return n;
  }

  private entries(): { name: string; entry: KvEntry }[] {
    const out: { name: string; entry: KvEntry }[] = [];
    for (const f of this.listing()) {
      if (!f.endsWith(".json")) continue;
      const name = f.slice(0, -".json".length);
      const entry = this.readSidecar(name);
      if (entry) out.push({ name, entry });
    }
    return out;
  }

  private readSidecar(name: string): KvEntry | undefined {
    try {
      const parsed = SidecarSchema.safeParse(JSON.parse(readFileSync(this.sidecarOf(name), "utf8")));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }

  private listing(): string[] {
    try {
      return readdirSync(this.dir);
    } catch {
      return [];
    }
  }

  private binOf(name: string): string {
    return join(this.dir, `${name}.bin`);
  }

  private sidecarOf(name: string): string {
    return join(this.dir, `${name}.json`);
  }
}

/** A session's saved state as the disk will describe it. */
export function entryOf(
  key: { userId: string; sessionId: string },
  fingerprint: string,
  saved: { n_saved: number; n_written: number },
  prompt: PromptRecord,
  sources: string[],
  now: number,
): KvEntry {
  return {
    version: 1,
    user_id: key.userId,
    session_id: key.sessionId,
    fingerprint,
    tokens: saved.n_saved,
    bytes: saved.n_written,
    saved_at: now,
    used_at: now,
    prompt,
    note_sources: sources,
  };
}
