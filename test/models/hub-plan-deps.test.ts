import { describe, expect, test } from "bun:test";
import { planDepsWithHub } from "../../src/models/hub-plan-deps.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { layRepo, tinyModel } from "./cache-layout.ts";

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

  test("an hf: model cut short in the cache, offline, names the pull that fetches it again", async () => {
    // The plan command's read (plan-with-hub.ts): the file resolves, its read finds it truncated.
    using dir = tmpdir();
    layRepo(dir.path, "org/short", { "s-Q4_K_M.gguf": { ...tinyModel(), truncateBy: 4096 } });
    const deps = planDepsWithHub(defaultPlanDeps, { HF_HUB_CACHE: dir.path, HF_HUB_OFFLINE: "1" }, {});
    const err = await deps.readModel("hf:org/short:Q4_K_M", "model.path").catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "model_missing", data: { problem: "truncated" } });
    expect((err as Error).message).toContain("pull it again with: local-ai pull org/short:Q4_K_M");
  });
});
