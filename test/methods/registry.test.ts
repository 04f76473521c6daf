import { describe, expect, test } from "bun:test";
import { METHODS, methodTable, TEST_METHODS } from "../../src/methods/index.ts";
import type { Services } from "../../src/methods/services.ts";
import type { RequestContext } from "../../src/protocol/method-table.ts";

describe("the method registry", () => {
  test("each entry's name and cancellability are its definition's", async () => {
    for (const entry of [...METHODS, ...TEST_METHODS]) {
      const def = await entry.load();
      expect([def.name, def.cancellable]).toEqual([entry.name, entry.cancellable]);
    }
  });

  test("the table serves test methods only when asked, and binds the services to each handler", async () => {
    let prepared = 0;
    const services = {
      parallelChats: () => 7,
      prepareForChat: () => {
        prepared++;
      },
    } as unknown as Services;
    expect([...methodTable(services, { testMethods: false }).keys()]).toEqual(METHODS.map((m) => m.name));
    const table = methodTable(services, { testMethods: true });
    expect(table.has("test.sleep")).toBe(true);
    const initialize = await table.get("initialize")!.load();
    const ctx = { methodNames: () => ["ping"] } as unknown as RequestContext;
    const result = initialize.run({ protocol_versions: [1] }, ctx) as {
      capabilities: { parallel_chat: { max_concurrent: number } };
    };
    expect(result.capabilities.parallel_chat.max_concurrent).toBe(7);
    // initialize is the host's "ready soon": the first chat is prepared in the wait that follows.
    expect(prepared).toBe(1);
  });
});
