import type { Database } from "bun:sqlite";
import { readdirSync, statSync } from "node:fs";
import { extname, join, relative } from "node:path";
import { logger } from "../util/logger.ts";
import { readSmallFile } from "../util/read-file.ts";
import { anyOf, likePattern, words } from "./fts-query.ts";
import { TermStats } from "./term-stats.ts";

/** A remembered passage: a past turn (`session:<id>`) or a chunk of a file (`file:<path>`). */
export interface MemoryHit {
  doc: { id: string; text: string; source: string };
  /** Higher is better. */
  score: number;
}

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
/**
 * The most recent matches ranked by bm25() (FTS5 must otherwise score every match before it
 * can order them): once the rare words are kept, a query rarely matches more.
 */
const RANKED_MATCHES = 1000;

/** The user's turns in other sessions, or chunks of this config's folders. */
const OWN_OR_FOLDER = `((m.user_id = $u AND m.session_id != $skip)
  OR (m.user_id = '' AND m.root IN (SELECT value FROM json_each($roots))))`;

interface Row {
  id: number;
  source: string;
  text: string;
  score: number;
}

/**
 * Memory (SPEC §5): a user's past turns in their other sessions, plus chunks of the files in
 * `memory.folders`, ranked with FTS5's bm25() — the turns are written by the turn's own commit
 * (store/conversations.ts), the folders indexed here, incrementally: a file is read again only
 * when its size or mtime changed. Without FTS5, a LIKE match ranked by words matched.
 */
export class MemoryStore {
  private foldersIndexed = false;
  private readonly stats: TermStats;

  constructor(
    private readonly db: Database,
    private readonly fts: boolean,
    private readonly folders: readonly string[],
  ) {
    this.stats = new TermStats(db, "memory_fts", "memory");
  }

  search(userId: string, query: string, topK: number, excludeSession?: string): MemoryHit[] {
    if (topK <= 0) return [];
    this.indexFoldersOnce();
    const skip = excludeSession ?? "";
    const rows = this.fts
      ? this.ftsRows(userId, query, topK, skip)
      : this.likeRows(userId, query, topK, skip);
    return rows.map((r) => ({ doc: { id: String(r.id), text: r.text, source: r.source }, score: r.score }));
  }

  private ftsRows(userId: string, query: string, topK: number, skip: string): Row[] {
    const match = anyOf(this.stats.informative(words(query)).join(" "));
    if (!match) return [];
    const rows = this.db
      .query(
        `SELECT m.id, m.source, m.text, -bm25(memory_fts) AS score
         FROM memory_fts JOIN memory m ON m.id = memory_fts.rowid
         WHERE memory_fts MATCH $q
           AND ${OWN_OR_FOLDER}
         ORDER BY memory_fts.rowid DESC LIMIT $cap`,
      )
      .all({ q: match, u: userId, skip, roots: JSON.stringify(this.folders), cap: RANKED_MATCHES }) as Row[];
    return rows.sort((a, b) => b.score - a.score || b.id - a.id).slice(0, topK);
  }

  /** Without FTS5: rows holding any of the words, the most words first, then the newest. */
  private likeRows(userId: string, query: string, topK: number, skip: string): Row[] {
    const w = words(query).slice(0, 8);
    if (w.length === 0) return [];
    const hits = w.map((_, i) => `(m.text LIKE $w${i} ESCAPE '\\')`);
    const params: Record<string, string | number> = {
      u: userId,
      skip,
      roots: JSON.stringify(this.folders),
      n: topK,
    };
    w.forEach((t, i) => {
      params[`w${i}`] = likePattern(t);
    });
    return this.db
      .query(
        `SELECT m.id, m.source, m.text, (${hits.join(" + ")}) AS score FROM memory m
         WHERE (${hits.join(" OR ")})
           AND ${OWN_OR_FOLDER}
         ORDER BY score DESC, m.at DESC LIMIT $n`,
      )
      .all(params) as Row[];
  }

  /** Brings the folders' chunks up to date once per process (memory is best-effort: errors are logged). */
  private indexFoldersOnce(): void {
    if (this.foldersIndexed) return;
    this.foldersIndexed = true;
    for (const root of this.folders) {
      try {
        this.indexFolder(root);
      } catch (err) {
        logger.warn(`memory folder ${root} could not be indexed: ${(err as Error).message}`);
      }
    }
  }

  private indexFolder(root: string): void {
    const files = listTextFiles(root);
    const known = new Map(
      (
        this.db.query("SELECT path, size, mtime_ms FROM memory_files WHERE root = ?").all(root) as {
          path: string;
          size: number;
          mtime_ms: number;
        }[]
      ).map((r) => [r.path, r]),
    );
    const changed = files.filter((f) => {
      const k = known.get(f.path);
      return !k || k.size !== f.size || k.mtime_ms !== f.mtimeMs;
    });
    const present = new Set(files.map((f) => f.path));
    const gone = [...known.keys()].filter((p) => !present.has(p));
    if (changed.length === 0 && gone.length === 0) return;
    const chunks = changed.map((f) => ({ file: f, parts: readChunks(f.path) }));
    this.db.transaction(() => {
      const drop = this.db.query("DELETE FROM memory WHERE user_id = '' AND root = ? AND source = ?");
      const forget = this.db.query("DELETE FROM memory_files WHERE path = ?");
      for (const path of gone) {
        drop.run(root, `file:${relative(root, path)}`);
        forget.run(path);
      }
      const add = this.db.query(
        "INSERT INTO memory (user_id, session_id, seq, source, root, text, at) VALUES ('', '', ?, ?, ?, ?, ?)",
      );
      const remember = this.db.query(
        "INSERT OR REPLACE INTO memory_files (path, root, size, mtime_ms) VALUES (?, ?, ?, ?)",
      );
      for (const { file, parts } of chunks) {
        const source = `file:${relative(root, file.path)}`;
        drop.run(root, source);
        parts.forEach((text, i) => {
          add.run(i, source, root, text, Math.round(file.mtimeMs));
        });
        remember.run(file.path, root, file.size, Math.round(file.mtimeMs));
      }
    })();
  }
}

interface TextFile {
  path: string;
  size: number;
  mtimeMs: number;
}

/** The folder's text files (dot-files and non-regular files skipped: a FIFO never blocks a read). */
function listTextFiles(root: string): TextFile[] {
  const out: TextFile[] = [];
  const walk = (dir: string) => {
    let entries: import("node:fs").Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      logger.warn(`memory folder ${dir} unreadable: ${(err as Error).message}`);
      return;
    }
    for (const e of entries) {
      if (e.name.startsWith(".") || out.length >= MAX_FOLDER_FILES) continue;
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.isFile() && TEXT_EXTENSIONS.has(extname(e.name).toLowerCase())) {
        try {
          const st = statSync(path);
          if (st.isFile() && st.size <= MAX_FILE_BYTES)
            out.push({ path, size: st.size, mtimeMs: st.mtimeMs });
        } catch {
          // Gone or unreadable: skipped; memory is best-effort.
        }
      }
    }
  };
  walk(root);
  return out;
}

function readChunks(path: string): string[] {
  try {
    // Regular files only, opened without blocking: a FIFO swapped in after the walk is refused.
    return chunk(readSmallFile(path, MAX_FILE_BYTES));
  } catch {
    return [];
  }
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
