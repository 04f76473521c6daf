import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative } from "node:path";
import { z } from "zod";
import type { Warning } from "../protocol/chat.ts";
import { logger } from "../util/logger.ts";
import { ensurePrivateTree } from "../util/private-fs.ts";
import { writeJsonAtomic } from "./atomic.ts";
import { Bm25, type Doc, type Hit } from "./bm25.ts";
import { moveAside } from "./set-aside.ts";

const TurnDocSchema = z.object({ id: z.string(), session_id: z.string(), text: z.string(), at: z.string() });
const TurnsFileSchema = z.object({ version: z.literal(1), turns: z.array(TurnDocSchema) });
type TurnDoc = z.infer<typeof TurnDocSchema>;

/** Text files indexed from memory.folders; others are skipped. */
const TEXT_EXTENSIONS = new Set([
  ".md",
  ".txt",
  ".markdown",
  ".rst",
  ".org",
  ".json",
  ".yaml",
  ".yml",
  ".csv",
]);
const MAX_FILE_BYTES = 1024 * 1024;
const MAX_FOLDER_FILES = 5000;
/** Folder files are split into chunks of about this many characters (at paragraph breaks). */
const CHUNK_CHARS = 1200;
/** Past turns kept per user; the oldest fall out of memory first. */
const MAX_TURNS = 5000;

/**
 * One user's memory: their past turns (persisted in data_dir/users/<user>/memory/turns.json,
 * appended after each turn) plus chunks of the configured folders (read when the index is
 * first built in this process). Ranked with BM25; the ranking index is rebuilt in memory.
 * The memory folder is owner-only (0700) and turns.json 0600. A turns file that is not fully
 * usable is treated like a corrupt history: moved aside, its valid entries kept, and a
 * `memory_corrupt` warning queued for the next chat's result (`takeWarnings`).
 */
export class MemoryIndex {
  private turns: TurnDoc[] = [];
  private folderDocs: Doc[] = [];
  private bm25: Bm25 | undefined;
  private readonly file: string;
  private dirReady = false;
  /** False when a corrupt file could not be moved aside: writing would destroy it. */
  private persist = true;
  private readonly warnings: Warning[] = [];

  constructor(
    private readonly dataDir: string,
    private readonly userId: string,
    private readonly folders: string[],
    private readonly now: () => Date = () => new Date(),
  ) {
    this.file = join(dataDir, "users", userId, "memory", "turns.json");
  }

  static forUser(dataDir: string, userId: string, folders: string[], now?: () => Date): MemoryIndex {
    return new MemoryIndex(dataDir, userId, folders, now);
  }

  /** Loads persisted turns (salvaging a corrupt file) and reads the folders. */
  load(): this {
    this.turns = this.readTurns();
    this.folderDocs = this.folders.flatMap((f) => readFolder(f));
    this.bm25 = undefined;
    return this;
  }

  /** Notices about the memory file not yet reported, each handed out once. */
  takeWarnings(): Warning[] {
    return this.warnings.splice(0);
  }

  get size(): number {
    return this.turns.length + this.folderDocs.length;
  }

  search(query: string, topK: number, excludeSession?: string): Hit[] {
    this.bm25 ??= this.build();
    // Ask for extra so that excluded hits do not leave the list short.
    const hits = this.bm25.search(query, topK + (excludeSession ? 16 : 0));
    return hits.filter((h) => !excludeSession || h.doc.source !== `session:${excludeSession}`).slice(0, topK);
  }

  addTurn(turn: TurnDoc): void {
    this.turns.push(turn);
    if (this.turns.length > MAX_TURNS) this.turns.splice(0, this.turns.length - MAX_TURNS);
    this.save();
    this.bm25 = undefined;
  }

  /**
   * The persisted turns. A file that is not fully usable is moved aside (never discarded or
   * written over), and its valid entries are written back at once so the next process has them.
   */
  private readTurns(): TurnDoc[] {
    if (!existsSync(this.file)) return [];
    const { turns, problem } = parseTurnsFile(this.file);
    if (problem === undefined) return turns;
    let aside: string;
    try {
      aside = moveAside(this.file, this.now());
    } catch (err) {
      this.persist = false;
      const why = (err as Error).message;
      logger.warn(`memory file ${this.file} is unreadable (${problem}) and could not be moved aside: ${why}`);
      this.warn(
        `the memory file ${this.file} could not be fully read (${problem}) nor moved aside (${why}); ` +
          `${turns.length} usable entries are used, and new turns are not saved until it is fixed`,
      );
      return turns;
    }
    logger.warn(`memory file ${this.file} was unreadable (${problem}); moved to ${aside}`);
    this.warn(
      `the memory file could not be fully read (${problem}); it was moved aside to ${aside} and ` +
        `its ${turns.length} usable entries were kept`,
    );
    this.turns = turns;
    try {
      if (turns.length > 0) this.save();
    } catch (err) {
      // Still in memory, and saved with the next turn.
      logger.warn(`memory file ${this.file} could not be rewritten: ${(err as Error).message}`);
    }
    return turns;
  }

  private warn(message: string): void {
    this.warnings.push({ code: "memory_corrupt", message });
  }

  private save(): void {
    if (!this.persist) return;
    if (!this.dirReady) {
      // Tightens folders an older version made 0755 (the names are user ids).
      ensurePrivateTree(this.dataDir, "users", this.userId, "memory");
      this.dirReady = true;
    }
    writeJsonAtomic(this.file, { version: 1, turns: this.turns });
  }

  private build(): Bm25 {
    const index = new Bm25();
    for (const t of this.turns) index.add({ id: t.id, text: t.text, source: `session:${t.session_id}` });
    for (const d of this.folderDocs) index.add(d);
    return index;
  }
}

/** The turns of a memory file, and what is wrong with it if anything (then `turns` holds the valid entries). */
function parseTurnsFile(file: string): { turns: TurnDoc[]; problem?: string } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    return {
      turns: [],
      problem: `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    };
  }
  if (text.length === 0) return { turns: [], problem: "empty file" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { turns: [], problem: `not valid JSON (${(err as Error).message})` };
  }
  const parsed = TurnsFileSchema.safeParse(value);
  if (parsed.success) return { turns: parsed.data.turns };
  const { version, turns: raw } = (value ?? {}) as { version?: unknown; turns?: unknown };
  if (version !== 1 || !Array.isArray(raw)) {
    const issue = parsed.error.issues[0];
    return {
      turns: [],
      problem: `unexpected shape at '${issue?.path.join(".") ?? ""}': ${issue?.message ?? "invalid"}`,
    };
  }
  // Only some entries are bad: keep the rest.
  const turns = raw.flatMap((t) => {
    const entry = TurnDocSchema.safeParse(t);
    return entry.success ? [entry.data] : [];
  });
  return { turns, problem: `${raw.length - turns.length} of ${raw.length} entries unusable` };
}

function readFolder(root: string): Doc[] {
  const docs: Doc[] = [];
  let files = 0;
  const walk = (dir: string) => {
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      logger.warn(`memory folder ${dir} unreadable: ${(err as Error).message}`);
      return;
    }
    for (const e of entries) {
      if (e.name.startsWith(".") || files >= MAX_FOLDER_FILES) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.isFile() && TEXT_EXTENSIONS.has(extname(e.name).toLowerCase())) {
        try {
          if (statSync(path).size > MAX_FILE_BYTES) continue;
          files++;
          const rel = relative(root, path);
          chunk(readFileSync(path, "utf8")).forEach((text, i) => {
            docs.push({ id: `${path}#${i}`, text, source: `file:${rel}` });
          });
        } catch {
          // Unreadable files are skipped; memory is best-effort.
        }
      }
    }
  };
  walk(root);
  return docs;
}

/** Splits at blank lines into chunks near CHUNK_CHARS, so a hit quotes a passage, not a book. */
export function chunk(text: string): string[] {
  const out: string[] = [];
  let current = "";
  for (const para of text.split(/\n\s*\n/)) {
    const p = para.trim();
    if (!p) continue;
    if (current && current.length + p.length > CHUNK_CHARS) {
      out.push(current);
      current = "";
    }
    current = current ? `${current}\n\n${p}` : p;
    while (current.length > CHUNK_CHARS * 2) {
      out.push(current.slice(0, CHUNK_CHARS));
      current = current.slice(CHUNK_CHARS);
    }
  }
  if (current) out.push(current);
  return out;
}
