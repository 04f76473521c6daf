import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Store } from "../../src/store/store.ts";
import { spawnCore } from "../../test/fixtures/core-process.ts";
import { bertModel } from "../../test/fixtures/gguf-bert.ts";
import { writeGguf } from "../../test/fixtures/gguf-writer.ts";
import { writeStack } from "../../test/fixtures/stack.ts";

/** Rows of memory the "on" core recalls from (embedded by its background job before timing starts). */
const ROWS = 2000;
const WORDS = "river stone lamp garden winter letter music bread window harbour mountain paper".split(" ");

type Core = ReturnType<typeof spawnCore>;

/**
 * The time from a chat's request to its `llm_start`: memory with an embedding model against
 * memory off (`top_k: 0`), two cores on the stand-in, turns alternating between them; the query's
 * embedding measured apart as an `embed` request of the same text on the "on" core.
 */
export async function turnPart(turns: number): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), "bench-retrieval-turn-"));
  try {
    const on = await startCore(join(work, "on"), ["  embedding_model: embed"], ROWS);
    const off = await startCore(join(work, "off"), ["  top_k: 0"], 0);
    await embedded(on);
    const times = { on: [] as number[], off: [] as number[], embed: [] as number[] };
    for (let i = 0; i < turns; i++) {
      const input = sentence(i);
      const t = performance.now();
      await on.request({ id: `e${i}`, method: "embed", params: { input } }, 30_000);
      times.embed.push(performance.now() - t);
      // Alternating which side goes first, so neither always runs on a warmer machine.
      for (const side of i % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const)) {
        times[side].push(await untilLlmStart(side === "on" ? on : off, `${side}${i}`, input));
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
    const added = med(times.on) - med(times.off) - med(times.embed);
    console.log(
      `turn (stand-in, ${ROWS} memory rows, ${turns} turns each, alternating): request → llm_start median ` +
        `memory off ${med(times.off).toFixed(2)} ms, memory + embedding model ${med(times.on).toFixed(2)} ms; ` +
        `the query's embed alone ${med(times.embed).toFixed(2)} ms; added beyond it ${added.toFixed(2)} ms (target ≤ 15)`,
    );
    for (const core of [on, off]) {
      await core.request({ id: "bye", method: "shutdown" });
      await core.exited();
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function startCore(dir: string, memoryYaml: string[], rows: number): Promise<Core> {
  const { mkdirSync } = await import("node:fs");
  mkdirSync(dir, { recursive: true });
  writeGguf(dir, "embed.gguf", bertModel());
  const stack = writeStack(dir, {
    extraYaml: [...memoryYaml, "models:", "  - {name: embed, path: ./embed.gguf, kind: embedding}"].join(
      "\n",
    ),
  });
  if (rows > 0) {
    const store = Store.open(stack.dataDir);
    for (let i = 0; i < rows; i++)
      store.conversations.commitTurn({
        userId: "default",
        sessionId: `old${i % 100}`,
        agent: "assistant",
        messages: [{ role: "user", content: sentence(i * 7) }],
        memoryText: sentence(i * 7),
        at: new Date(),
      });
    store.close();
  }
  const core = spawnCore({ cwd: dir, env: stack.env });
  await core.request({ id: "init", method: "initialize" });
  // Both servers started before timing: the first chat loads the chat model, the first embed the other.
  await core.request({ id: "first", method: "chat", params: { input: "hello" } }, 60_000);
  return core;
}

async function embedded(core: Core): Promise<void> {
  for (let i = 0; ; i++) {
    const index = (await core.request({ id: `st${i}`, method: "status" })).result.memory_index;
    if (index && index.total > 0 && index.embedded === index.total) return;
    if (i > 1200) throw new Error(`memory not embedded after 2 minutes: ${JSON.stringify(index)}`);
    await Bun.sleep(100);
  }
}

async function untilLlmStart(core: Core, id: string, input: string): Promise<number> {
  const t = performance.now();
  core.send({ id, method: "chat", params: { input, session_id: id } });
  await core.waitFor((ms) => ms.some((m) => m.id === id && m.event === "llm_start"), 30_000);
  const took = performance.now() - t;
  await core.waitFor((ms) => ms.some((m) => m.id === id && m.type !== "event"), 30_000);
  return took;
}

function sentence(i: number): string {
  return Array.from({ length: 8 }, (_, k) => WORDS[(i * 31 + k * 17) % WORDS.length]).join(" ");
}
