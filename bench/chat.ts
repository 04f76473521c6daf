/**
 * Chat streaming bench: added latency per token from the stand-in's send to the moment the
 * writer hands the line carrying it to its sink (the last step before stdout), over a long
 * scripted stream; and whether a host that reads normally loses any events. Run with the
 * default `app.stream_gather_ms` (a line may carry several tokens: docs/performance.md,
 * "Joined pieces") and with 0 (a line per token).
 *
 *   ./node_modules/.bin/bun bench/chat.ts [tokens=3000] [delay_ms=1]
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { methodTable } from "../src/methods/index.ts";
import { Dispatcher } from "../src/protocol/dispatcher.ts";
import { Writer } from "../src/protocol/transport/writer.ts";
import { CoreServices } from "../src/server/services.ts";
import { LlamaStandIn } from "../test/fixtures/llama-stand-in/in-process.ts";
import { FakeProvider } from "../test/fixtures/llama-stand-in/provider.ts";

const tokens = Number(process.argv[2] ?? 3000);
const delayMs = Number(process.argv[3] ?? 1);

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function run(label: string, sinkDelayMs: number, gatherMs?: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "local-ai-bench-"));
  writeFileSync(
    join(dir, "config.yaml"),
    JSON.stringify({
      app: { data_dir: "./data", ...(gatherMs === undefined ? {} : { stream_gather_ms: gatherMs }) },
      memory: { enabled: false },
    }),
  );
  const llama = new LlamaStandIn();
  const services = new CoreServices({
    configPath: join(dir, "config.yaml"),
    cwd: dir,
    llama: () => new FakeProvider(llama, 1),
  });
  /** When each token's line reached the sink, a token at a time. */
  const receivedAt: number[] = [];
  let lines = 0;
  let result: Record<string, unknown> | undefined;
  let done!: () => void;
  const finished = new Promise<void>((r) => {
    done = r;
  });
  const writer = new Writer(
    {
      write: async (data) => {
        const now = performance.now();
        for (const line of data.split("\n")) {
          if (!line) continue;
          const msg = JSON.parse(line);
          if (msg.event === "llm_chunk") {
            lines++;
            for (const _ of String(msg.delta).matchAll(/tok\d+ /g)) receivedAt.push(now);
          }
          if (msg.type === "result" || msg.type === "error") {
            result = msg;
            done();
          }
        }
        // A host that reads normally: a short pause per batch, like a pipe read and a parse.
        if (sinkDelayMs > 0) await Bun.sleep(sinkDelayMs);
      },
    },
    { queueSize: 1024 },
  );
  const dispatcher = new Dispatcher(methodTable(services, { testMethods: false }), writer, async () => {});
  llama.script({ content: Array.from({ length: tokens }, (_, i) => `tok${i} `), chunk_delay_ms: delayMs });
  const started = performance.now();
  dispatcher.handleLine(JSON.stringify({ id: 1, method: "chat", params: { input: "go" } }));
  await finished;
  const wall = performance.now() - started;

  const sent = llama.sentAt;
  const n = Math.min(sent.length, receivedAt.length);
  const added = Array.from({ length: n }, (_, i) => (receivedAt[i] ?? 0) - (sent[i] ?? 0)).sort(
    (a, b) => a - b,
  );
  const gaps = sent
    .slice(1)
    .map((t, i) => t - (sent[i] ?? 0))
    .sort((a, b) => a - b);
  const res = (result as { result?: { dropped_events?: number } } | undefined)?.result;
  process.stdout.write(
    `${label}: tokens=${tokens} sent=${sent.length} tokens received=${receivedAt.length} in ${lines} llm_chunk dropped_events=${res?.dropped_events ?? "n/a"} wall=${wall.toFixed(0)}ms\n` +
      `  added latency SSE send -> writer sink: p50=${pct(added, 50).toFixed(3)}ms p99=${pct(added, 99).toFixed(3)}ms max=${(added.at(-1) ?? 0).toFixed(3)}ms\n` +
      `  fake's own send interval:            p50=${pct(gaps, 50).toFixed(3)}ms p99=${pct(gaps, 99).toFixed(3)}ms\n`,
  );
  await services.stop();
  llama.stop();
  rmSync(dir, { recursive: true, force: true });
}

await run("fast host (sink returns at once)", 0);
await run("normal host (1 ms per batch)", 1);
await run("fast host, a line per token (stream_gather_ms 0)", 0, 0);
await run("normal host, a line per token (stream_gather_ms 0)", 1, 0);
