import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Endpoint } from "../../src/config/rpc-endpoint.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { rpcWorkerStatusSchema } from "../../src/protocol/rpc-workers.ts";
import { checkWorkers } from "../../src/rpc/check.ts";
import { queryWorker, type WorkerReport } from "../../src/rpc/client.ts";
import { sameWorkers } from "../../src/rpc/same-worker.ts";
import { versionOutliers } from "../../src/rpc/versions.ts";
import type { WorkerFailureKind } from "../../src/rpc/wire.ts";
import { rpcWorkerSnapshot, WorkerBook } from "../../src/rpc/workers.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { RpcWatch } from "../../src/runtime/rpc-watch.ts";
import { RpcWorkerStandIn } from "../fixtures/rpc-worker.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const ok = (endpoint: string, major = 5): WorkerReport => ({
  endpoint,
  ok: true,
  version: { major, minor: 1, patch: 0 },
  devices: [{ free_bytes: 2 ** 30, total_bytes: 2 ** 31 }],
  ms: 1,
});
const workers = (...endpoints: string[]) => ConfigSchema.parse({ llama: { rpc: endpoints } }).llama.rpc;

describe("versionOutliers", () => {
  test("all agree, or one answered: nobody is named", () => {
    expect(versionOutliers([ok("a:1"), ok("b:1")]).size).toBe(0);
    expect(versionOutliers([ok("a:1", 7)]).size).toBe(0);
  });
  test("the major most workers speak is the reference; a tie goes to the first listed", () => {
    expect([...versionOutliers([ok("a:1", 7), ok("b:1"), ok("c:1")]).keys()]).toEqual(["a:1"]);
    expect([...versionOutliers([ok("a:1", 7), ok("b:1")]).keys()]).toEqual(["b:1"]);
  });
});

describe("checkWorkers and the book", () => {
  test("asks every worker at once and records what it learned", async () => {
    await using good = await new RpcWorkerStandIn().start();
    const closed = await pickFreePort();
    const book = new WorkerBook();
    const t0 = Date.now();
    const reports = await checkWorkers(workers(good.endpoint, `127.0.0.1:${closed}`), { book });
    expect(reports.map((r) => r.ok)).toEqual([true, false]);
    expect(Date.now() - t0).toBeLessThan(1500);
    const snap = rpcWorkerSnapshot([good.endpoint, `127.0.0.1:${closed}`, "never:1"], book);
    expect(snap.map((s) => s.state)).toEqual(["ok", "refused", "unchecked"]);
    expect(snap[0]).toMatchObject({
      version: "5.1.0",
      message: expect.stringContaining("RPC v5.1.0, 1 device"),
    });
    expect(snap[0]!.checked_at).toBeGreaterThanOrEqual(t0);
  });

  test("a worker the running llama-server holds is not asked: its last answer stands, marked in use", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const book = new WorkerBook();
    await checkWorkers(workers(w.endpoint), { book });
    book.launched([w.endpoint]);
    w.mode = "hang"; // would time out if asked
    const t0 = Date.now();
    const [r] = await checkWorkers(workers(w.endpoint), { book, timeoutMs: 5000 });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(r).toMatchObject({ ok: true, in_use: true });
    expect(rpcWorkerSnapshot([w.endpoint], book)[0]!.state).toBe("in_use");
    book.released();
    expect(rpcWorkerSnapshot([w.endpoint], book)[0]!.state).toBe("ok");
  });

  test("a worker held under one name is not asked under another: the twin stays same_worker, not timeout", async () => {
    // localhost:P and 127.0.0.1:P are one worker; the plan used the first and left the second
    // out. Asked while llama-server holds it, the twin met a busy worker: 2 s, then 'timeout'
    // with the advice to stop the other llama-server using it (the core's own).
    await using w = await new RpcWorkerStandIn().start();
    const twin = `localhost:${w.port}`;
    const config = workers(w.endpoint, twin);
    const book = new WorkerBook();
    const first = await checkWorkers(config, { book });
    expect(sameWorkers(first).has(twin)).toBe(true);
    book.launched([w.endpoint]);
    w.mode = "hang"; // busy with llama-server: a query would time out
    const asked: string[] = [];
    const query = (t: Endpoint, o: { timeoutMs: number }) => {
      asked.push(t.endpoint);
      return queryWorker(t, o);
    };
    const again = await checkWorkers(config, { book, query, timeoutMs: 300 });
    expect(asked).toEqual([]);
    expect(again[1]).toMatchObject({ endpoint: twin, ok: true });
    expect(sameWorkers(again).has(twin)).toBe(true);
    expect(rpcWorkerSnapshot([twin], book)[0]!.state).toBe("ok");
  });

  test("a lost worker reads as lost until it answers again", () => {
    const book = new WorkerBook();
    book.record(ok("a:1"));
    book.launched(["a:1"]);
    book.lost("a:1", "stopped answering while llama-server used it");
    expect(rpcWorkerSnapshot(["a:1"], book)[0]).toMatchObject({ state: "lost" });
    book.record(ok("a:1"));
    expect(rpcWorkerSnapshot(["a:1"], book)[0]).toMatchObject({ state: "ok" });
  });

  test("a version llama-server refused stays refused while the worker reports it", async () => {
    const book = new WorkerBook();
    const query = async () => ok("a:1", 5);
    book.record(ok("a:1", 5));
    book.refuseVersion("a:1", null); // not logged: the version it last reported
    const [r] = await checkWorkers(workers("a:1"), { book, query });
    expect(r).toMatchObject({ ok: false, failure: "wrong_version", version: { major: 5 } });
    if (!r!.ok) expect(r!.message).toContain("llama-server refused its RPC protocol v5.1.0");
    const [updated] = await checkWorkers(workers("a:1"), { book, query: async () => ok("a:1", 7) });
    expect(updated!.ok).toBe(true);
  });

  test("a refusal holds for the llama-server that refused: another build, or the same one replaced, asks again", async () => {
    await using dir = tmpdir();
    const refuser = join(dir.path, "llama-server");
    const other = join(dir.path, "llama-server-new");
    writeFileSync(refuser, "build 1");
    writeFileSync(other, "build 2");
    const book = new WorkerBook();
    const query = async () => ok("a:1", 5);
    book.record(ok("a:1", 5));
    const watch = new RpcWatch({ onLost: () => {}, book, accepts: async () => true });
    watch.begin(["a:1"], refuser);
    watch.line("E RPC server version mismatch: 5.1.0");
    watch.line("E Failed to connect to a:1");
    watch.ended();
    const check = async (server?: string) =>
      (await checkWorkers(workers("a:1"), { book, query, ...(server ? { server } : {}) }))[0]!;
    expect(await check(refuser)).toMatchObject({ ok: false, failure: "wrong_version" });
    // Not knowing which llama-server will run (doctor without a binary): still refused.
    expect(await check()).toMatchObject({ ok: false, failure: "wrong_version" });
    // llama.binary now names a build of the worker's version: it is asked, and answers.
    expect((await check(other)).ok).toBe(true);
    // The refusing binary updated in place (a package upgrade): another build too.
    writeFileSync(refuser, "build 2, longer");
    expect((await check(refuser)).ok).toBe(true);
  });

  test("every state status can show parses with the strict schema status embeds", () => {
    const book = new WorkerBook();
    const kinds: WorkerFailureKind[] = [
      "refused",
      "unresolved",
      "unreachable",
      "timeout",
      "closed",
      "wrong_version",
      "malformed",
    ];
    kinds.forEach((failure, i) => {
      book.record({ endpoint: `h:${i + 1}`, ok: false, failure, message: failure, ms: 1 });
    });
    book.record(ok("ok:1"));
    book.record(ok("used:1"));
    book.record(ok("lost:1"));
    book.launched(["used:1", "lost:1"]);
    book.lost("lost:1", "gone");
    const endpoints = [...kinds.map((_, i) => `h:${i + 1}`), "ok:1", "used:1", "lost:1", "never:1"];
    const snap = rpcWorkerSnapshot(endpoints, book);
    for (const s of snap) expect(rpcWorkerStatusSchema().parse(s)).toEqual(s);
    expect(snap.map((s) => s.state)).toEqual([...kinds, "ok", "in_use", "lost", "unchecked"]);
  });
});
