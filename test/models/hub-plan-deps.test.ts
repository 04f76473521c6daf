import { describe, expect, test } from "bun:test";
import { planDepsWithHub } from "../../src/models/hub-plan-deps.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";

describe("plan's model read through the hub's deps", () => {
  test("an hf: model whose cache folder's stat does not answer is unreadable before its resolve reads the cache", async () => {
    const asked: string[] = [];
    let read = 0;
    const deps = planDepsWithHub(
      {
        ...defaultPlanDeps,
        readModel: () => {
          read++;
          return Promise.reject(new Error("not reached"));
        },
      },
      { HF_HUB_CACHE: "/nas/hf/hub", HF_HUB_OFFLINE: "1" },
      {
        home: "/home/u",
        stat: (path: string) => {
          asked.push(path);
          return new Promise<void>(() => {});
        },
        statWaitMs: 1,
      },
    );
    const err = await deps.readModel("hf:org/model:Q4_K_M", "model.path").catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "model_missing",
      data: { path: "hf:org/model:Q4_K_M", problem: "unreadable", key: "model.path" },
    });
    expect((err as Error).message).toContain("/nas/hf/hub");
    // The resolve's synchronous reads of the cache never ran: on a dead mount they held the loop.
    expect(asked).toEqual(["/nas/hf/hub"]);
    expect(read).toBe(0);
  });
});
