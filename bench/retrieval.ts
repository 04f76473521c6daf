#!/usr/bin/env bun
/**
 * Memory recall with vectors (issue 29, docs/agent.md "Memory", docs/performance.md "Memory
 * recall"). Parts:
 *
 *   recall   hybrid top 10 (FTS5 bm25 fused with the sign-bit index rescored exactly) over
 *            10,000 and 100,000 memory rows of synthetic 768-dimension vectors: median and p95
 *            per search (targets ≤ 5 ms and ≤ 30 ms), the share of queries whose top 10 is the
 *            same as with an exact float scan (≥ 98%), the index's memory
 *   turn     a chat through the compiled core and the stand-in: the time from the request to
 *            `llm_start` with memory and an embedding model, against memory off, alternating in
 *            the same run; the one embedding call for the query measured apart (target: ≤ 15 ms
 *            added beyond it)
 *
 *   ./node_modules/.bin/bun bench/retrieval.ts [recall] [turn] [--sizes=10000,100000] [--queries=200]
 */
import { recallPart } from "./retrieval/recall.ts";
import { turnPart } from "./retrieval/turn.ts";

const args = process.argv.slice(2);
const parts = args.filter((a) => !a.startsWith("--"));
const flag = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const sizes = (flag("sizes") ?? "10000,100000").split(",").map(Number);
const queries = Number(flag("queries") ?? 200);

if (parts.length === 0 || parts.includes("recall")) await recallPart(sizes, queries);
if (parts.length === 0 || parts.includes("turn")) await turnPart(Number(flag("turns") ?? 30));
