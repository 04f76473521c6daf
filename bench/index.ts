#!/usr/bin/env bun
/**
 * Runs every benchmark in turn (each prints its own table): `npm run bench`, or
 * `bun bench/index.ts stdio plan` for some of them. Numbers, not pass/fail: the targets and the
 * latest results live in docs/performance.md.
 */
import { join } from "node:path";

const ALL = [
  "stdio",
  "plan",
  "supervisor",
  "chat",
  "client",
  "pull",
  "chat-overhead",
  "store",
  "session-row",
  "reuse",
];
const chosen = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const names = chosen.length > 0 ? chosen : ALL;

let failed = 0;
for (const name of names) {
  if (!ALL.includes(name)) {
    process.stderr.write(`unknown bench '${name}' (known: ${ALL.join(", ")})\n`);
    failed++;
    continue;
  }
  process.stdout.write(`\n== bench/${name}.ts\n`);
  const proc = Bun.spawn([process.execPath, join(import.meta.dir, `${name}.ts`)], {
    env: { ...process.env, LOCAL_AI_LOG_LEVEL: process.env.LOCAL_AI_LOG_LEVEL ?? "warn" },
    stdout: "inherit",
    stderr: "inherit",
  });
  if ((await proc.exited) !== 0) failed++;
}
process.exit(failed > 0 ? 1 : 0);
