import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "../../src/store/db/open.ts";
import { MemoryStore } from "../../src/store/memory-store.ts";
import { fuseRanks } from "../../src/store/rank-fusion.ts";
import { exactTop, SyntheticVectors } from "../../test/fixtures/synthetic-vectors.ts";

const DIMS = 768;
const FP = "bench-model";
const VOCAB = Array.from({ length: 5000 }, (_, i) => `w${i.toString(36)}x`);

/** Recall over `size` rows: latency of the hybrid search, agreement with exact search, memory held. */
export async function recallPart(sizes: number[], queries: number): Promise<void> {
  for (const size of sizes) {
    const dir = mkdtempSync(join(tmpdir(), "bench-retrieval-"));
    try {
      await one(dir, size, queries);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

async function one(dir: string, size: number, queries: number): Promise<void> {
  const gen = new SyntheticVectors(DIMS, Math.max(10, Math.floor(size / 50)), 7);
  const { db, fts } = openStore(dir);
  const memory = new MemoryStore(db, fts, []);
  const rows: { id: number; vector: Float32Array; words: string[] }[] = [];
  const t0 = performance.now();
  const insert = db.query(
    "INSERT INTO memory (user_id, session_id, seq, source, text, at) VALUES ('u', ?, ?, ?, ?, ?) RETURNING id",
  );
  for (let start = 0; start < size; start += 2000) {
    const batch: { id: number; vector: Float32Array }[] = [];
    db.transaction(() => {
      for (let i = start; i < Math.min(size, start + 2000); i++) {
        const words = Array.from({ length: 30 }, () => VOCAB[Math.floor(zipf(gen) * VOCAB.length)] as string);
        const { id } = insert.get(`s${i % 500}`, i, `session:s${i % 500}`, words.join(" "), i) as {
          id: number;
        };
        const vector = gen.vector(i);
        rows.push({ id, vector, words });
        batch.push({ id, vector });
      }
    })();
    memory.vectors.put(FP, batch);
  }
  const built = performance.now() - t0;
  // As a core's database is between writes: the log folded back in (a bulk load leaves it long).
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  const rssBefore = process.memoryUsage().rss;
  // A search before the index is read: it reads at most 10,000 rows itself (the loop held that long).
  const tFirst = performance.now();
  memory.vectors.nearest({ fingerprint: FP, vector: gen.vector(0) }, scope(), 1);
  const firstMs = performance.now() - tFirst;
  const tLoad = performance.now();
  // The rest read in slices with the loop given back, as the embedder does when a core starts.
  await memory.vectors.warm(FP);
  const loadMs = performance.now() - tLoad;
  const heldBytes = memory.vectors.indexBytes();
  const rssAfter = process.memoryUsage().rss;

  const times: number[] = [];
  const vectorTimes: number[] = [];
  const wordTimes: number[] = [];
  let sameVector = 0;
  let sameHybrid = 0;
  for (let q = 0; q < queries; q++) {
    const target = rows[gen.int(rows.length)] as (typeof rows)[number];
    const vector = gen.near(target.vector);
    const text = `${target.words.slice(0, 3).join(" ")} ${VOCAB[gen.int(VOCAB.length)]}`;
    const t = performance.now();
    const hits = memory.search("u", text, 10, "", { fingerprint: FP, vector });
    times.push(performance.now() - t);
    const exact = exactTop(vector, rows, 50);
    const tv = performance.now();
    const approx = memory.vectors.nearest({ fingerprint: FP, vector }, scope(), 50);
    vectorTimes.push(performance.now() - tv);
    if (
      sameIds(
        exact.slice(0, 10),
        approx.slice(0, 10).map((r) => r.id),
      )
    )
      sameVector++;
    const tw = performance.now();
    const words = memory.search("u", text, 50).map((h) => Number(h.doc.id));
    wordTimes.push(performance.now() - tw);
    const exactHybrid = fuseRanks([words, exact])
      .slice(0, 10)
      .map((f) => f.id);
    if (
      sameIds(
        exactHybrid,
        hits.map((h) => Number(h.doc.id)),
      )
    )
      sameHybrid++;
  }
  const median = (xs: number[]) => ([...xs].sort((a, b) => a - b)[xs.length >> 1] as number).toFixed(2);
  times.sort((a, b) => a - b);
  const pct = (p: number) =>
    (times[Math.min(times.length - 1, Math.floor(p * times.length))] as number).toFixed(2);
  console.log(
    `recall ${size.toLocaleString("en")} rows (${DIMS} dims, built in ${(built / 1000).toFixed(1)} s): ` +
      `hybrid top 10 median ${pct(0.5)} ms, p95 ${pct(0.95)} ms (words alone ${median(wordTimes)}, vectors alone ${median(vectorTimes)}); ` +
      `top 10 as exact: vector ${((100 * sameVector) / queries).toFixed(1)}%, hybrid ${((100 * sameHybrid) / queries).toFixed(1)}%; ` +
      `index ${(heldBytes / 2 ** 20).toFixed(1)} MiB held (RSS +${((rssAfter - rssBefore) / 2 ** 20).toFixed(1)} MiB), a first search before it is read ${firstMs.toFixed(0)} ms, the rest read in slices in ${loadMs.toFixed(0)} ms; load average ${loadavg()[0]?.toFixed(1)}`,
  );
  db.close(false);
}

function scope() {
  return { sql: "m.user_id = $u", params: { u: "u" }, owners: ["u", ""] };
}

function sameIds(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

/** A word's rank drawn roughly by Zipf's law: a few words common, most rare. */
function zipf(gen: SyntheticVectors): number {
  const u = (gen.int(1_000_000) + 1) / 1_000_001;
  return Math.min(0.999999, u ** 3);
}
