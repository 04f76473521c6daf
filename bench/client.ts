#!/usr/bin/env bun
/** Client overhead against the compiled core: ping round trips and event throughput. Prints numbers. */
import { join } from "node:path";
import { LocalAiClient } from "../src/client/index.ts";

const binary = join(import.meta.dir, "../dist/local-ai");
const t0 = performance.now();
const client = await LocalAiClient.start({ binary, env: { ...process.env, LOCAL_AI_TEST_METHODS: "1" } });
console.log(`start + initialize: ${(performance.now() - t0).toFixed(1)} ms`);

const n = 2000;
let t = performance.now();
for (let i = 0; i < n; i++) await client.ping();
console.log(`sequential ping: ${(((performance.now() - t) / n) * 1000).toFixed(0)} µs per round trip (${n})`);

t = performance.now();
await Promise.all(Array.from({ length: n }, () => client.ping()));
console.log(`concurrent ping: ${(n / ((performance.now() - t) / 1000)).toFixed(0)} per s (${n})`);

// test.flood emits in one synchronous burst, so the core's bounded writer (1024) drops most of it:
// this shows the drop accounting reaching the host, not the client's ceiling.
const count = 200_000;
t = performance.now();
const flood = client.stream<{ dropped_events: number }>("test.flood", { count, size: 16 });
let seen = 0;
for await (const _ of flood) seen++;
const { dropped_events } = await flood.result;
const s = (performance.now() - t) / 1000;
console.log(
  `events: ${seen} received, ${dropped_events} dropped by the core, ${(seen / s).toFixed(0)} per s`,
);
await client.shutdown();
