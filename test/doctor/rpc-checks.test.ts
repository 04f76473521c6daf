import { describe, expect, test } from "bun:test";
import { ConfigSchema, type RpcWorkerConfig } from "../../src/config/schema.ts";
import { renderDoctor } from "../../src/doctor/render.ts";
import { rpcChecks } from "../../src/doctor/rpc-checks.ts";
import { checkWorkers } from "../../src/rpc/check.ts";
import { WorkerBook } from "../../src/rpc/workers.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { RpcWorkerStandIn, type WorkerOptions } from "../fixtures/rpc-worker.ts";

// doctor's worker checks against worker stand-ins: one check per worker, a failure saying
// which worker, why, and what to do.

/** Worker checks that wait `timeoutMs` for each worker's answers. */
const waiting = (timeoutMs: number) => ({
  workers: (w: readonly RpcWorkerConfig[]) => checkWorkers(w, { book: new WorkerBook(), timeoutMs }),
});
// A stand-in that answers is given long: under a loaded CI box it took past 300 ms (ms: 407), and
// a worker meant to be ok failed as frozen. The short wait is for those meant to time out.
const deps = waiting(60_000);
const TIMES_OUT = waiting(300);
const configOf = (rpc: unknown[]) => ConfigSchema.parse({ llama: { rpc } });

async function one(options: WorkerOptions, checks = deps) {
  await using w = await new RpcWorkerStandIn(options).start();
  const [check] = await rpcChecks(configOf([w.endpoint]), checks);
  return { check: check!, endpoint: w.endpoint };
}

describe("doctor: RPC workers", () => {
  test("one worker listed under two names: the second fails, naming the first (llama-server would wait on it forever)", async () => {
    await using w = await new RpcWorkerStandIn().start();
    const [a, b] = await rpcChecks(configOf([`localhost:${w.port}`, w.endpoint]), deps);
    expect(a).toMatchObject({ status: "ok" });
    expect(b).toMatchObject({ id: `rpc:${w.endpoint}`, status: "fail", data: { failure: "same_worker" } });
    expect(b!.message).toContain(`the same worker as localhost:${w.port}`);
    expect(b!.fix).toContain("once");
  });

  test.skipIf(process.platform !== "linux")(
    "one worker on 0.0.0.0 listed under two of this machine's addresses: the second fails as the same worker",
    async () => {
      await using w = await new RpcWorkerStandIn({ host: "0.0.0.0" }).start();
      const [a, b] = await rpcChecks(configOf([`127.0.0.1:${w.port}`, `127.0.0.2:${w.port}`]), deps);
      expect(a).toMatchObject({ status: "ok" });
      expect(b).toMatchObject({ status: "fail", data: { failure: "same_worker" } });
      expect(b!.message).toContain(`the same worker as 127.0.0.1:${w.port}`);
    },
  );

  test.skipIf(process.platform !== "linux")(
    "two workers on one port of two addresses of this machine are two workers",
    async () => {
      await using a = await new RpcWorkerStandIn().start();
      await using b = await new RpcWorkerStandIn({ host: "127.0.0.2", port: a.port }).start();
      const checks = await rpcChecks(configOf([a.endpoint, `127.0.0.2:${b.port}`]), deps);
      expect(checks.map((c) => c.status)).toEqual(["ok", "ok"]);
    },
  );

  test("no llama.rpc, no worker checks", async () => {
    expect(await rpcChecks(configOf([]), deps)).toEqual([]);
  });

  test("a worker that answers: ok, with its version, devices and free memory", async () => {
    const { check, endpoint } = await one({});
    expect(check).toMatchObject({ id: `rpc:${endpoint}`, status: "ok" });
    expect(check.message).toBe(`${endpoint}: RPC v5.1.0, 1 device: 23.5 GiB free of 23.5 GiB`);
    expect(check.data).toMatchObject({ version: "5.1.0", devices: [{ free_bytes: 25276059648 }] });
  });

  test("a closed port: refused, with how to start the worker", async () => {
    const port = await pickFreePort();
    const [check] = await rpcChecks(configOf([`127.0.0.1:${port}`]), deps);
    expect(check).toMatchObject({
      id: `rpc:127.0.0.1:${port}`,
      status: "fail",
      data: { failure: "refused" },
    });
    expect(check!.message).toContain("connection refused");
    expect(check!.fix).toBe(`start the worker on 127.0.0.1: ggml-rpc-server -p ${port}`);
  });

  test("a remote worker refused: the fix reminds that it listens on 127.0.0.1 unless -H is given", async () => {
    const [check] = await rpcChecks(configOf(["192.0.2.1:50052"]), {
      workers: async () => [
        { endpoint: "192.0.2.1:50052", ok: false, failure: "refused", message: "connection refused", ms: 1 },
      ],
    });
    expect(check!.fix).toContain("-H <its LAN address> -p 50052");
    expect(check!.fix).toContain("trusted networks only");
  });

  const bad: [WorkerOptions, string, RegExp, RegExp][] = [
    [{ mode: "hang" }, "timeout", /did not answer within 300 ms/, /one client at a time/],
    // It answered HELLO, so it is on, reachable and not busy with another client: restart it.
    [{ mode: "midway" }, "timeout", /answered HELLO .* but stopped answering/, /^restart ggml-rpc-server/],
    [{ mode: "garbage" }, "malformed", /size field/, /not a ggml-rpc-server/],
    [{ mode: "huge" }, "malformed", /9223372036854775808/, /not a ggml-rpc-server/],
    [{ mode: "http" }, "malformed", /HTTP server/, /check the port/],
    [{ mode: "close" }, "closed", /without answering HELLO/, /same llama.cpp build/],
  ];
  test.each(bad)("%o → fail (%s), saying why and what to do", async (options, failure, message, fix) => {
    const { check, endpoint } = await one(options, failure === "timeout" ? TIMES_OUT : deps);
    expect(check).toMatchObject({ id: `rpc:${endpoint}`, status: "fail", data: { failure } });
    expect(check.message.startsWith(`${endpoint}: `)).toBe(true);
    expect(check.message).toMatch(message);
    expect(check.fix).toMatch(fix);
  });

  test("a worker speaking another major version than the others is named as such, not as unreachable", async () => {
    await using a = await new RpcWorkerStandIn().start();
    await using b = await new RpcWorkerStandIn({ version: [7, 0, 0] }).start();
    await using c = await new RpcWorkerStandIn().start();
    const checks = await rpcChecks(configOf([a.endpoint, b.endpoint, c.endpoint]), deps);
    expect(checks.map((x) => x.status)).toEqual(["ok", "fail", "ok"]);
    expect(checks[1]!.message).toContain("speaks RPC protocol v7.0.0 while");
    expect(checks[1]!.fix).toContain("same llama.cpp build");
  });

  test("a worker with almost nothing free warns; a configured budget is shown", async () => {
    const { check } = await one({ devices: [{ free: 100 * 2 ** 20, total: 8 * 2 ** 30 }] });
    expect(check.status).toBe("warn");
    await using w = await new RpcWorkerStandIn().start();
    const [withBudget] = await rpcChecks(configOf([{ endpoint: w.endpoint, memory_bytes: 2 ** 30 }]), deps);
    expect(withBudget!.message).toContain("budget 1024 MiB from llama.rpc");
  });

  test("the pretty report shows each worker and its fix line", async () => {
    const port = await pickFreePort();
    const checks = await rpcChecks(configOf([`127.0.0.1:${port}`]), deps);
    const text = renderDoctor({ ok: false, checks });
    expect(text).toContain(`rpc:127.0.0.1:${port}`);
    expect(text).toContain(`fix: start the worker on 127.0.0.1: ggml-rpc-server -p ${port}`);
  });
});
