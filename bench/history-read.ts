/**
 * A long session's history as a turn reads it (docs/agent.md "The store"): read whole in one
 * statement (what the lease's write does on a miss) against read a page a turn of the loop
 * (`SessionHistories.load`, before the lease), each on a cold cache; the longest the loop went
 * without a 1 ms timer meanwhile, which is how long `ping` and `cancel` wait. Median of 5.
 *
 *   bun bench/history-read.ts [messages] [scale]   (default 100,000 messages of 12 and 40 words,
 *   scale times that; about 20 s)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatMessage } from "../src/protocol/chat-message.ts";
import { Store } from "../src/store/store.ts";
import { loopLag } from "../test/fixtures/loop-lag.ts";

const n = Number(process.argv[2] ?? 100_000);
const scale = Number(process.argv[3] ?? 1);
const words = "the model read what you wrote and answered it in a few short lines of plain text".split(" ");
const text = (i: number, k: number) =>
  Array.from({ length: k }, (_, j) => words[(i + j) % words.length]).join(" ");
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const dir = mkdtempSync(join(tmpdir(), "bench-history-"));
try {
  const store = Store.open(dir, { chunkThread: false });
  const messages = Array.from(
    { length: n },
    (_, i): ChatMessage =>
      i % 2
        ? { role: "assistant", content: text(i, 40 * scale) }
        : { role: "user", content: text(i, 12 * scale) },
  );
  store.conversations.commitTurn({ userId: "u", sessionId: "big", agent: "a", messages, at: new Date() });
  const whole: number[] = [];
  const paged: number[] = [];
  const pagedTotal: number[] = [];
  for (let run = 0; run < 5; run++) {
    store.conversations.forget("u");
    let lag = loopLag(1);
    await new Promise((r) => setTimeout(r, 5));
    store.conversations.history("u", "big");
    await new Promise((r) => setTimeout(r, 5));
    whole.push(lag.stop());
    store.conversations.forget("u");
    lag = loopLag(1);
    const t0 = performance.now();
    await store.conversations.histories.load("u", "big");
    pagedTotal.push(performance.now() - t0);
    paged.push(lag.stop());
  }
  const ms = (x: number) => `${x.toFixed(1)} ms`;
  console.log(`${n} messages, scale ${scale}`);
  console.log(`  read whole, the loop held:        ${ms(median(whole))}`);
  console.log(
    `  read in pages, the longest hold:  ${ms(median(paged))} (all of it ${ms(median(pagedTotal))})`,
  );
  store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
