import { afterEach, describe, expect, test } from "bun:test";
import { killFakes, rejection, startFake } from "./fake-core-fixture.ts";

// A host's callbacks that throw (a bug in its logging code) against the fake core (fake-core.mjs).
afterEach(killFakes);

describe("host callbacks that throw", () => {
  test("onExit, onStderr and the logger throwing leave every pending call settled", async () => {
    const warned: string[] = [];
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on("uncaughtException", onUncaught);
    try {
      const client = await startFake({
        onExit: () => {
          throw new Error("host onExit broke");
        },
        onStderr: () => {
          throw new Error("host onStderr broke");
        },
        logger: {
          warn: (m) => {
            warned.push(m);
            throw new Error("host logger broke");
          },
        },
      });
      const hanging = client.request("hang", {}, { timeoutMs: 0 });
      const chat = client.chat({ input: "hang" });
      const dying = client.request("die");
      for (const p of [hanging, chat.result, dying]) expect((await rejection(p)).code).toBe("core_exited");
      expect(client.running).toBe(false);
      await Bun.sleep(20); // onExit runs after the calls are settled
      expect(warned).toContain("the host's onExit callback threw: host onExit broke");
      expect(warned).toContain("the host's onStderr callback threw: host onStderr broke");
      expect(uncaught).toEqual([]);
    } finally {
      process.off("uncaughtException", onUncaught);
    }
  });

  test("a chat's onOtherEvent that throws does not stop its other events or its result", async () => {
    const client = await startFake();
    const chat = client.chat(
      { input: "hi" },
      {
        onOtherEvent: () => {
          throw new Error("host handler broke");
        },
      },
    );
    let text = "";
    for await (const ev of chat) if (ev.event === "llm_chunk") text += ev.delta;
    expect(text).toBe("Hello");
    expect((await chat.result).response).toBe("Hello");
  });
});
