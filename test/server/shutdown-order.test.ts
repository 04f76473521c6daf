import { describe, expect, test } from "bun:test";
import { ShutdownOrder } from "../../src/server/shutdown-order.ts";

/** A stop that says when it began and waits for `done` to end. */
function gate(name: string, events: string[]) {
  const done = Promise.withResolvers<void>();
  return {
    stop: async () => {
      events.push(`${name} begins`);
      await done.promise;
      events.push(`${name} ends`);
    },
    end: () => done.resolve(),
  };
}

describe("ShutdownOrder", () => {
  test("reverse order of making, `last` after all; a `beside` one runs from the start, awaited before `last`", async () => {
    const events: string[] = [];
    const order = new ShutdownOrder();
    const [store, llama, mcp, reuse] = ["store", "llama", "mcp", "reuse"].map((n) => gate(n, events)) as [
      ReturnType<typeof gate>,
      ReturnType<typeof gate>,
      ReturnType<typeof gate>,
      ReturnType<typeof gate>,
    ];
    order.add("store", 0, store.stop, { last: true });
    order.add("llama", 0, llama.stop);
    order.add("mcp", 0, mcp.stop, { beside: true });
    order.add("reuse", 0, reuse.stop);
    const stopped = order.stop();
    await Bun.sleep(1);
    // A hung MCP server's stop does not hold up the KV save or llama-server's stop.
    expect(events).toEqual(["mcp begins", "reuse begins"]);
    reuse.end();
    await Bun.sleep(1);
    llama.end();
    await Bun.sleep(1);
    expect(events).toEqual(["mcp begins", "reuse begins", "reuse ends", "llama begins", "llama ends"]);
    // The store waits for every other, the one beside included.
    mcp.end();
    await Bun.sleep(1);
    expect(events.slice(5)).toEqual(["mcp ends", "store begins"]);
    store.end();
    await stopped;
    expect(events.at(-1)).toBe("store ends");
    expect(order.begun).toBe(true);
  });

  test("a stop that throws is logged and the rest still stop", async () => {
    const stopped: string[] = [];
    const order = new ShutdownOrder();
    order.add("a", 0, async () => void stopped.push("a"));
    order.add(
      "b",
      0,
      async () => {
        throw new Error("no");
      },
      { beside: true },
    );
    order.add("c", 0, async () => {
      throw new Error("no");
    });
    await order.stop();
    expect(stopped).toEqual(["a"]);
  });
});
