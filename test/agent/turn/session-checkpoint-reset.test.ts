import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { TurnSession } from "../../../src/agent/turn/session.ts";
import type { PreparedImage } from "../../../src/images/prepare.ts";
import type { Warning } from "../../../src/protocol/chat.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { png } from "../../fixtures/images.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A checkpoint that cannot be read (another version wrote it, its input kept apart is gone) is
// dropped with `checkpoint_reset`, and the turn it held is set aside as a discarded one is: its
// staged photos erased with their pages rewritten before run_start (not left in the database's
// log until the next erase or start), and the turn marked `set_aside`, so its commit erases the
// session's saved KV state, which held that turn.

const photo: PreparedImage = { format: "png", mime: "image/png", width: 3, height: 3, data: png(3, 3) };

async function firstTurn(store: Store, input: string, warnings: Warning[], images?: PreparedImage[]) {
  const leased = await store.lease("u", "s1", AbortSignal.timeout(5000), () =>
    TurnSession.begin(
      store,
      { userId: "u", sessionId: "s1" },
      { traceId: "t1", input, agent: "a", resume: false, ...(images ? { images } : {}) },
      warnings,
      () => new Date(1_000),
    ),
  );
  await leased.value.firstWrite(AbortSignal.timeout(5000));
  return leased;
}

test("an unreadable checkpoint's turn is set aside: its photo's pages rewritten, its KV state owed an erase", async () => {
  using dir = tmpdir("local-ai-ckpt-reset-");
  const store = Store.open(dir.path);
  try {
    (await firstTurn(store, "look at this", [], [photo])).release();
    await store.afterErases();
    const db = new Database(join(dir.path, DB_FILE));
    db.run("UPDATE checkpoints SET body = '{not json'");
    db.close();
    const warnings: Warning[] = [];
    const fresh = await firstTurn(store, "something else", warnings);
    expect(warnings.map((w) => w.code)).toEqual(["checkpoint_reset"]);
    expect(fresh.value.state.set_aside).toBe(true);
    fresh.release();
    await store.afterErases();
    using check = readDb(join(dir.path, DB_FILE));
    expect(check.query("SELECT COUNT(*) AS n FROM attachments").get()).toEqual({ n: 0 });
    expect(check.query("SELECT 1 FROM meta WHERE key = 'rewrite_owed'").get()).toBeNull();
  } finally {
    await store.stop();
  }
}, 10_000);
