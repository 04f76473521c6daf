import { afterEach, describe, expect, test } from "bun:test";
import { killFakes, rejection, startFake } from "./fake-core-fixture.ts";

// A host's callbacks that throw (a bug in its logging code) against the fake core (fake-core.mjs).
afterEach(killFakes);

/** Runs `body` with what the host's process reports as `event` collected; returns it. */
async function escaping(
  event: "uncaughtException" | "unhandledRejection",
  body: () => Promise<void>,
): Promise<unknown[]> {
  const seen: unknown[] = [];
  const collect = (err: unknown) => seen.push(err);
  process.on(event, collect);
  try {
    await body();
  } finally {
    process.off(event, collect);
  }
  return seen;
}

describe("host callbacks that throw", () => {
  test("onExit, onStderr and the logger throwing leave every pending call settled", async () => {
    const warned: string[] = [];
    const uncaught = await escaping("uncaughtException", async () => {
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
    });
    expect(uncaught).toEqual([]);
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

  test("async callbacks that reject are reported as throws, not left unhandled rejections", async () => {
    // `onExit: async (info) => { await ui.notify(info) }` is how a host writes it; its rejection
    // escaped as an unhandled rejection, which ends a Node host by default.
    const warned: string[] = [];
    const unhandled = await escaping("unhandledRejection", async () => {
      const broke = (what: string) => async () => {
        throw new Error(`host ${what} broke`);
      };
      const client = await startFake({
        onExit: broke("onExit"),
        onStderr: broke("onStderr"),
        logger: {
          warn: async (m) => {
            warned.push(m);
            throw new Error("host logger broke");
          },
        },
      });
      await client.chat({ input: "hi" }, { onOtherEvent: broke("onOtherEvent") }).result;
      await client.request("no.such.method").catch(() => {});
      expect((await rejection(client.request("die"))).code).toBe("core_exited");
      await Bun.sleep(50); // onExit runs after the calls are settled; then its rejection
      for (const name of ["onOtherEvent", "onStderr", "onExit"])
        expect(warned).toContain(`the host's ${name} callback threw: host ${name} broke`);
    });
    expect(unhandled).toEqual([]);
  });

  test("a throw or rejection with no string form is reported, not thrown again", async () => {
    // String() of a null-prototype object throws a TypeError; raised while reporting the host's
    // own throw, it escaped from the core's stderr listener, and from a rejection handler.
    const warned: string[] = [];
    const uncaught = await escaping("uncaughtException", async () => {
      const client = await startFake({
        onStderr: () => {
          throw Object.create(null);
        },
        logger: { warn: (m) => warned.push(m) },
      });
      expect((await rejection(client.request("die"))).code).toBe("core_exited");
    });
    const unhandled = await escaping("unhandledRejection", async () => {
      const client = await startFake({ onExit: () => Promise.reject(Object.create(null)) });
      expect((await rejection(client.request("die"))).code).toBe("core_exited");
      await Bun.sleep(50);
    });
    expect([uncaught, unhandled]).toEqual([[], []]);
    expect(warned).toContain("the host's onStderr callback threw: [object Object]");
  });
});
