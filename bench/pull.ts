/**
 * Pull throughput against curl, from the loopback hub stand-in: a sparse 1 GB GGUF, pulled by
 * the core (redirect, stream to `.incomplete`, sha256, rename, snapshot link) and fetched by
 * `curl -L -o` from the same server, alternating, each into a fresh folder. Targets: at least
 * 0.9× curl's rate, and RSS growth under 64 MB (nothing buffers the whole file). Each pull runs
 * in a child process so its RSS is its own (the stand-in lives in this one). Each round also
 * times SHA-256 alone: a pull must hash every byte, so on loopback that rate caps it.
 *
 *   bun bench/pull.ts [--size-mb 1024] [--rounds 3]
 */
import { createHash } from "node:crypto";
import { closeSync, createReadStream, ftruncateSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const args = process.argv.slice(2);
const opt = (name: string, def: number) => {
  const i = args.indexOf(name);
  return i === -1 ? def : Number(args[i + 1]);
};

if (args[0] === "--child") await child(args[1]!, args[2]!);
else await parent();

/** One pull in this process; prints its time and RSS (before, peak while pulling) as JSON. */
async function child(endpoint: string, cache: string): Promise<void> {
  const { pullModel } = await import("../src/models/pull.ts");
  Bun.gc(true);
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const out = await pullModel(
    { repo: "bench/big", quant: "Q4_K_M", revision: "main" },
    { env: { HF_ENDPOINT: endpoint, HF_HUB_CACHE: cache }, home: cache },
    { signal: new AbortController().signal, progress: () => {} },
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0); // every thread of the process, the hash worker's too
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage().rss);
  const cpuS = (cpu.user + cpu.system) / 1e6;
  process.stdout.write(JSON.stringify({ ms, bytes: out.size_bytes, rss0, peak, cpuS }) + "\n");
}

async function parent(): Promise<void> {
  const { startHubStandIn } = await import("../test/fixtures/hub-stand-in.ts");
  const size = opt("--size-mb", 1024) * 1024 * 1024;
  const rounds = opt("--rounds", 3);
  const dir = mkdtempSync(join(tmpdir(), "local-ai-bench-pull-"));
  try {
    const source = join(dir, "big.gguf");
    const fd = openSync(source, "w");
    ftruncateSync(fd, size);
    closeSync(fd);
    const sha256 = await hashFile(source);
    // The body comes by sendfile: on loopback the server's CPU is the client's too, and a real
    // CDN takes none of it (the node:http stand-in with its fault knobs took 0.7-0.8 s a GiB).
    const hub = await startHubStandIn(
      [{ id: "bench/big", files: [{ path: "big-Q4_K_M.gguf", source, sha256 }] }],
      {
        nativeStorage: true,
      },
    );
    const url = `${hub.url}/bench/big/resolve/main/big-Q4_K_M.gguf`;
    const rows: { who: string; mbps: number; extra: string }[] = [];
    for (let r = 0; r < rounds; r++) {
      rows.push(await runCurl(url, dir, size));
      rows.push(await runPull(hub.url, dir));
      rows.push(hashRate());
    }
    await hub.close();
    for (const row of rows)
      console.log(`${row.who.padEnd(5)} ${row.mbps.toFixed(0).padStart(6)} MB/s ${row.extra}`);
    const median = (who: string) => {
      const v = rows
        .filter((x) => x.who === who)
        .map((x) => x.mbps)
        .sort((a, b) => a - b);
      return v[Math.floor(v.length / 2)]!;
    };
    const ratio = median("pull") / median("curl");
    const ceiling = Math.min(1, median("sha") / median("curl"));
    console.log(
      `${(size / 2 ** 20).toFixed(0)} MiB, ${rounds} rounds: pull median ${median("pull").toFixed(0)} MB/s, ` +
        `curl median ${median("curl").toFixed(0)} MB/s, ratio ${ratio.toFixed(2)} (target ≥ 0.90)`,
    );
    console.log(
      `SHA-256 on one core: ${median("sha").toFixed(0)} MB/s, so a pull that verifies what it fetches can reach at most ` +
        `${ceiling.toFixed(2)}× curl here, and only with a core free for the hash (this machine: ${navigator.hardwareConcurrency})`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** curl alone, and (for scale) the same download followed by `sha256sum`, the check a pull makes. */
async function runCurl(url: string, dir: string, size: number) {
  const out = join(dir, "curl.out");
  const server0 = process.cpuUsage();
  const t0 = performance.now();
  const p = Bun.spawn(["curl", "-sS", "-L", "-o", out, url], { stdout: "ignore", stderr: "inherit" });
  if ((await p.exited) !== 0) throw new Error("curl failed");
  const ms = performance.now() - t0;
  const server = process.cpuUsage(server0); // this process: the stand-in serving curl
  const cpu = Number(p.resourceUsage()?.cpuTime.total ?? 0);
  const h = Bun.spawn(["sha256sum", out], { stdout: "ignore", stderr: "inherit" });
  await h.exited;
  const withHash = performance.now() - t0;
  rmSync(out, { force: true });
  return {
    who: "curl",
    mbps: size / 1e6 / (ms / 1000),
    extra: `CPU ${(cpu / 1e6 / (size / 2 ** 30)).toFixed(2)} s/GiB, the server's ${((server.user + server.system) / 1e6 / (size / 2 ** 30)).toFixed(2)} (curl then sha256sum: ${(size / 1e6 / (withHash / 1000)).toFixed(0)} MB/s)`,
  };
}

async function runPull(endpoint: string, dir: string) {
  const cache = mkdtempSync(join(dir, "cache-"));
  const p = Bun.spawn([process.execPath, import.meta.path, "--child", endpoint, cache], {
    stdout: "pipe",
    stderr: "inherit",
    env: { ...process.env, LOCAL_AI_LOG_LEVEL: "warn" },
  });
  const text = await new Response(p.stdout).text();
  if ((await p.exited) !== 0) throw new Error("pull child failed");
  rmSync(cache, { recursive: true, force: true });
  const r = JSON.parse(text) as { ms: number; bytes: number; rss0: number; peak: number; cpuS: number };
  return {
    who: "pull",
    mbps: r.bytes / 1e6 / (r.ms / 1000),
    extra: `CPU ${(r.cpuS / (r.bytes / 2 ** 30)).toFixed(2)} s/GiB, RSS ${(r.rss0 / 2 ** 20).toFixed(0)} → peak ${(r.peak / 2 ** 20).toFixed(0)} MiB (growth ${((r.peak - r.rss0) / 2 ** 20).toFixed(1)} MiB, target < 64)`,
  };
}

/** The verification's own limit: SHA-256 of bytes already in memory, on this thread. */
function hashRate() {
  const block = new Uint8Array(256 * 2 ** 20).fill(1); // touched, so page faults are not timed
  const t0 = performance.now();
  createHash("sha256").update(block).digest("hex");
  const ms = performance.now() - t0;
  return { who: "sha", mbps: block.length / 1e6 / (ms / 1000), extra: "(SHA-256 of 256 MiB in memory)" };
}

async function hashFile(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 4 * 1024 * 1024 }))
    h.update(chunk as Buffer);
  return h.digest("hex");
}
