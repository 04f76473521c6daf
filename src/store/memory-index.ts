import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative } from "node:path";
import { z } from "zod";
import { logger } from "../util/logger.ts";
import { ensurePrivateTree } from "../util/private-fs.ts";
import { writeJsonAtomic } from "./atomic.ts";
import { Bm25, type Doc, type Hit } from "./bm25.ts";

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
 * The memory folder is owner-only (0700) and turns.json 0600.
 */
export class MemoryIndex {
  private turns: TurnDoc[] = [];
  private folderDocs: Doc[] = [];
  private bm25: Bm25 | undefined;
  private readonly file: string;
  private dirReady = false;

  constructor(
    private readonly dataDir: string,
    private readonly userId: string,
    private readonly folders: string[],
  ) {
    this.file = join(dataDir, "users", userId, "memory", "turns.json");
  }

  static forUser(dataDir: string, userId: string, folders: string[]): MemoryIndex {
    return new MemoryIndex(dataDir, userId, folders);
  }

  /** Loads persisted turns and reads the folders. A corrupt turns file starts memory afresh. */
  load(): this {
    if (existsSync(this.file)) {
      try {
        this.turns = TurnsFileSchema.parse(JSON.parse(readFileSync(this.file, "utf8"))).turns;
      } catch (err) {
        logger.warn(
          `memory index ${this.file} unreadable (${(err as Error).message}); rebuilding from new turns`,
        );
        this.turns = [];
      }
    }
    this.folderDocs = this.folders.flatMap((f) => readFolder(f));
    this.bm25 = undefined;
    return this;
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

  private save(): void {
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
