import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const WRITER = join(import.meta.dir, "..", "..", "fixtures", "store-writer.ts");
/** Raise for a thorough run (docs/agent.md gives the last one): LOCAL_AI_TEST_KILL_TRIALS=500. */
const TRIALS = Number(process.env.LOCAL_AI_TEST_KILL_TRIALS ?? 40);

/** Starts the writer, lets it commit for a random while, SIGKILLs it; returns the turns it said it committed. */
async function killAtRandom(dataDir: string, seed: number): Promise<number[]> {
  const child = Bun.spawn([process.execPath, WRITER, dataDir, "s"], { stdout: "pipe", stderr: "ignore" });
  const said: number[] = [];
  let ready = false;
  const reading = (async () => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of child.stdout) {
      buf += decoder.decode(chunk, { stream: true });
      let nl = buf.indexOf("\n");
      while (nl >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line === "ready") ready = true;
        else if (line.startsWith("committed ")) said.push(Number(line.slice(10)));
        nl = buf.indexOf("\n");
      }
    }
  })();
  while (!ready) await Bun.sleep(2);
  await Bun.sleep(1 + ((seed * 7919) % 40));
  child.kill("SIGKILL");
  await child.exited;
  await reading;
  return said;
}

describe("SIGKILL at random instants while turns commit", () => {
  test(`every turn said committed is there after, and the database passes quick_check (${TRIALS} trials)`, async () => {
    using dir = tmpdir();
    let total = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const said = await killAtRandom(dir.path, trial);
      total += said.length;
      const db = new Database(join(dir.path, DB_FILE));
      expect(db.query("PRAGMA quick_check").get()).toEqual({ quick_check: "ok" });
      db.close();
      const store = Store.open(dir.path);
      expect(store.takeResets().at(-1)).toBeUndefined();
      const contents = new Set(store.conversations.history("u", "s").map((m) => m.content));
      for (const n of said) expect(contents.has(`answer ${n}`)).toBe(true);
      // No turn is torn: every question has its answer.
      const h = store.conversations.history("u", "s");
      expect(h.length % 2).toBe(0);
      store.close();
    }
    expect(total).toBeGreaterThan(TRIALS);
  }, 120_000);
});
