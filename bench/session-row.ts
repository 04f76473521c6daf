/**
 * A session's next turn on its way to the request (issue 31; docs/performance.md, "The session's
 * row not made twice"): the session lease's write, which reads the session and writes the turn's
 * first checkpoint, run cold as a chat after a pause is (100 ms of sleep before each), the two
 * sides alternating round by round so both see the same drift:
 * - baseline: the write as it was, with the insert of the session's row that does nothing for a
 *   session that has one (the statement `ensureSession` runs, word for word);
 * - current: the write as a turn now makes it, which knows the row is there from its reading.
 *
 *   bun bench/session-row.ts [--rounds N]     (N rounds of each, 60 by default; ~30 s)
 */
import type { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TurnSession } from "../src/agent/turn/session.ts";
import { Store } from "../src/store/store.ts";
import { median } from "./overhead/stream-timing.ts";

const args = process.argv.slice(2);
const roundsAt = args.indexOf("--rounds");
const ROUNDS = roundsAt >= 0 ? Math.max(4, Number(args[roundsAt + 1]) || 60) : 60;
const PAUSE_MS = 100;

const fmt = (x: number) => x.toFixed(3);

const root = mkdtempSync(join(tmpdir(), "local-ai-bench-session-row-"));
try {
  const store = Store.open(root, { chunkThread: false });
  const db = (store as unknown as { db: Database }).db;
  const insert = db.query(
    `INSERT INTO sessions (user_id, session_id, title, agent, created_at, updated_at)
     VALUES ($u, $s, $title, $agent, $at,
       MAX($at, COALESCE((SELECT MAX(updated_at) FROM sessions WHERE user_id = $u), 0) + 1))
     ON CONFLICT DO NOTHING`,
  );
  const key = { userId: "u", sessionId: "kept" };
  let n = 0;
  /** One turn of the session: its lease's write timed, then committed as a turn ends. */
  const turn = async (baseline: boolean): Promise<number> => {
    const start = { traceId: `t${n++}`, input: "Tell me about lighthouses.", agent: "a", resume: false };
    const t0 = performance.now();
    const leased = await store.lease("u", "kept", AbortSignal.timeout(5000), () => {
      if (baseline) insert.run({ u: "u", s: "kept", title: "x", agent: "a", at: Date.now() });
      return TurnSession.begin(store, key, start, [], () => new Date());
    });
    const t = performance.now() - t0;
    leased.value.state.turn.push({ role: "assistant", content: "They keep ships off the rocks." });
    await leased.value.commit(undefined);
    leased.release();
    return t;
  };
  try {
    for (let i = 0; i < 10; i++) await turn(i % 2 === 0);
    const sides = { baseline: [] as number[], current: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const baseline of r % 2 === 0 ? [true, false] : [false, true]) {
        await Bun.sleep(PAUSE_MS);
        sides[baseline ? "baseline" : "current"].push(await turn(baseline));
      }
    }
    const [b, c] = [median(sides.baseline), median(sides.current)];
    console.log(
      `a session's next turn, the lease's write, ${ROUNDS} each, alternating, ${PAUSE_MS} ms idle before each (medians):\n` +
        `  with the insert that does nothing ${fmt(b)} ms, without it ${fmt(c)} ms (${fmt(c / b)}×, ${fmt(b - c)} ms less)`,
    );
  } finally {
    store.close();
  }
} finally {
  rmSync(root, { recursive: true, force: true });
}
