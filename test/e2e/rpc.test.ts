import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { RpcWorkerStandIn } from "../fixtures/rpc-worker.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// RPC workers from the host's side (docs/distributed.md): the compiled core plans on two worker
// stand-ins, the llama-server stand-in holds both, one dies mid-chat, the chat's error names it,
// and the next chat runs on a server planned without it; plan and doctor say so.
const onPosix = process.platform !== "win32";

describe.skipIf(!onPosix)("RPC workers through the compiled binary", () => {
  test("a worker lost mid-chat is named in the chat's error; the next chat runs without it", async () => {
    await using dir = tmpdir();
    await using a = await new RpcWorkerStandIn().start();
    await using b = await new RpcWorkerStandIn().start();
    const stack = writeStack(dir.path);
    const file = join(dir.path, "config.yaml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace("llama:\n", `llama:\n  rpc: ["${a.endpoint}", "${b.endpoint}"]\n`),
    );
    await using core = spawnCore({ cwd: dir.path, env: stack.env });

    const plan = await core.request({ id: "p", method: "plan" });
    expect(plan.result.plan.workers.map((w: { status: string }) => w.status)).toEqual(["used", "used"]);
    const argv: string[] = plan.result.plan.argv;
    expect(argv[argv.indexOf("--rpc") + 1]).toBe(`${a.endpoint},${b.endpoint}`);

    const first = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
    expect(first.result.response).toBe("You said: hi");

    await b.kill();
    const lost = await core.request({ id: 2, method: "chat", params: { input: "again" } }, 20_000);
    expect(lost).toMatchObject({ type: "error", code: "internal_error", data: { reason: "server_failed" } });
    expect(lost.message).toContain(`RPC worker ${b.endpoint} stopped answering`);

    const third = await core.request({ id: 3, method: "chat", params: { input: "still there?" } }, 20_000);
    expect(third.result.response).toBe("You said: still there?");

    const doctor = await core.request({ id: "d", method: "doctor" }, 20_000);
    const rpcChecks = doctor.result.checks.filter((c: { id: string }) => c.id.startsWith("rpc:"));
    expect(rpcChecks.map((c: { id: string; status: string }) => [c.id, c.status])).toEqual([
      [`rpc:${a.endpoint}`, "ok"],
      [`rpc:${b.endpoint}`, "fail"],
    ]);
    expect(rpcChecks[0].message).toContain("the running llama-server holds it");
    const after = await core.request({ id: "p2", method: "plan" });
    expect(after.result.plan.workers.map((w: { status: string }) => w.status)).toEqual(["used", "left_out"]);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  }, 60_000);
});
