import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { warmup } from "../../src/methods/warmup.ts";
import type { RequestContext } from "../../src/protocol/method-table.ts";
import type { Supervisor } from "../../src/runtime/supervisor.ts";
import { CoreServices } from "../../src/server/services.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { pidAlive } from "./helpers/harness.ts";

describe.skipIf(process.platform === "win32")("the core's llama provider and the warmup method", () => {
  test("warmup starts llama-server from config, streams progress, slots follow the plan, Core.stop stops it", async () => {
    await using dir = tmpdir();
    const binary = writeFakeLlamaServer(dir.path);
    const model = writeFakeModel(dir.path);
    writeFileSync(
      join(dir.path, "config.yaml"),
      `llama:\n  binary: ${binary}\n  parallel: 2\nmodel:\n  path: ${model}\n  context: 2048\n`,
    );
    const core = new CoreServices({ configPath: join(dir.path, "config.yaml"), cwd: dir.path });
    const events: { event: string; fields?: Record<string, unknown> }[] = [];
    const ctx = {
      id: "w1",
      signal: new AbortController().signal,
      stopping: new AbortController().signal,
      emit: (event: string, fields: object) =>
        events.push({ event, fields: fields as Record<string, unknown> }) > 0,
      droppedEvents: 0,
      cancel: () => false,
      methodNames: () => [],
      activeRequests: () => [],
      shutdown: async () => {},
      settle: () => true,
    } satisfies RequestContext;
    const result = (await warmup.run({ user_id: "u1" }, ctx, core)) as { status: string; slots: number };
    expect(result.status).toBe("ready");
    expect(result.slots).toBe(2);
    expect(core.parallelChats()).toBe(2);
    // Warm-up also opens the conversation database, so the first chat does not.
    expect(existsSync(join(core.config().app.data_dir, "local-ai.db"))).toBe(true);
    expect(events[0]).toMatchObject({ event: "warmup_progress", fields: { phase: "starting", attempt: 1 } });
    expect(events.at(-1)?.fields?.phase).toBe("ready");
    const pid = (core.llama() as Supervisor).pid() as number;
    expect(pidAlive(pid)).toBe(true);
    await core.stop();
    expect(pidAlive(pid)).toBe(false);
  });
});
