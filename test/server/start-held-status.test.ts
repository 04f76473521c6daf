import { describe, expect, test } from "bun:test";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { methodTable } from "../../src/methods/index.ts";
import type { Services } from "../../src/methods/services.ts";
import type { RequestContext } from "../../src/protocol/method-table.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { type CoreStatusResult, statusResultSchema } from "../../src/protocol/status.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, rejection, testPlan } from "../runtime/helpers/harness.ts";
import { oddModelStack } from "./odd-model-stack.ts";

// status's start_held_until (docs/protocol.md#status), read through the status method itself: a
// model whose start failed once spawned, then a chat's start refused by the hold, says until
// when, the time the refusal's data.next_try_at gives.

const never = () => new AbortController().signal;
const FAILING = { FAKE_LLAMA_FAIL_START: "E something odd happened", FAKE_LLAMA_FAIL_EXIT: "3" };

async function status(services: Partial<Services>): Promise<CoreStatusResult> {
  const handler = await methodTable(services as Services, { testMethods: false })
    .get("status")!
    .load();
  const ctx = { id: "s", activeRequests: () => [] } as unknown as RequestContext;
  return statusResultSchema().parse(await handler.run({}, ctx)) as CoreStatusResult;
}

describe.skipIf(process.platform === "win32")("status of a model whose start is held", () => {
  test("the model section alone: its default row says until when", async () => {
    await using dir = tmpdir();
    const h = makeSupervisor(dir.path, { env: FAILING });
    try {
      const before = await status({ existingLlama: () => h.supervisor });
      expect(before.models?.[0]?.start_held_until).toBeNull();
      await rejection(h.supervisor.acquire(never()));
      const held = await rejection(h.supervisor.acquire(never()));
      const next = held.data?.next_try_at as string;
      expect(typeof next).toBe("string");
      const after = await status({ existingLlama: () => h.supervisor });
      expect(after.models?.[0]).toMatchObject({ name: "default", start_held_until: next });
      // The object a one-model host reads says it as well, as it says gpu_out_of_memory.
      expect(after.llama.start_held_until).toBe(next);
    } finally {
      await h.supervisor.stop();
    }
  });

  test("several models: the failed model's row says until when, the others' null; default's in llama too", async () => {
    await using dir = tmpdir();
    const { model, config } = oddModelStack(dir.path, FAILING);
    const plan = async () => {
      const devices = [{ id: "cpu", usage: { total: 1 }, budget_bytes: 100 }] as unknown as DevicePlan[];
      return { plan: { devices }, launch: testPlan(model, { slot_save_path: null }) };
    };
    const reuse = { saveBeforeUnload: async () => {}, stop: async () => {} } as unknown as PromptReuse;
    const several = new SeveralModels({
      config: () => config,
      reuse: () => reuse,
      pinnedProblem: async () => null,
      plan,
    });
    const services = {
      existingLlama: () => undefined,
      models: () => several,
    } as unknown as Partial<Services>;
    const odd = several.provider({ kind: "path", name: "odd" });
    const row = async (name: string) => (await status(services)).models?.find((m) => m.name === name);
    try {
      await rejection(odd.acquire(never()));
      const held = await rejection(odd.acquire(never()));
      const next = held.data?.next_try_at as string;
      expect(typeof next).toBe("string");
      expect(await row("odd")).toMatchObject({ state: "failed", start_held_until: next });
      expect((await row("default"))?.start_held_until).toBeNull();
      expect((await status(services)).llama.start_held_until).toBeNull();
      // The model section (`default`), failed with no runtime left: its row and the llama object.
      const main = several.provider({ kind: "path", name: "default" });
      await rejection(main.acquire(never()));
      const mainHeld = await rejection(main.acquire(never()));
      const mainNext = mainHeld.data?.next_try_at as string;
      expect(await row("default")).toMatchObject({ state: "failed", start_held_until: mainNext });
      expect((await status(services)).llama).toMatchObject({ state: "failed", start_held_until: mainNext });
    } finally {
      await several.stop();
    }
  });
});
