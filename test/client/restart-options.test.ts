import { afterEach, describe, expect, setSystemTime, test } from "bun:test";
import { LocalAiClient, type RestartOptions } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// Restart options a host fills from its own settings, some unset.
afterEach(killFakes);

/** A client whose first core serves and whose every relaunch dies at start-up. */
async function crashLooping(restart: RestartOptions) {
  const children: FakeChild[] = [];
  const restarts: { attempt: number; delayMs: number }[] = [];
  const spawn = () => {
    const child = new FakeChild();
    if (children.length > 0) setImmediate(() => child.exit(1, null));
    children.push(child);
    return child;
  };
  const client = track(
    await LocalAiClient.start({ binary: "local-ai", spawn, restart, onRestart: (r) => restarts.push(r) }),
  );
  children[0]?.exit(1, null);
  return { client, children, restarts };
}

describe("restart options", () => {
  test("a field given as undefined keeps its default: a bounded count and a real delay", async () => {
    const unset = {
      maxRestarts: undefined,
      initialDelayMs: undefined,
      maxDelayMs: undefined,
      resetAfterMs: undefined,
    };
    const { children, restarts } = await crashLooping(unset);
    await Bun.sleep(300);
    // Before: maxRestarts undefined was never spent and the delay NaN, a relaunch every ms.
    expect(restarts).toEqual([{ attempt: 1, delayMs: 500 }]);
    expect(children).toHaveLength(1);
  });

  test("maxRestarts undefined stops after the default three", async () => {
    const { client, children } = await crashLooping({ maxRestarts: undefined, initialDelayMs: 10 });
    const err = await rejection(client.request("echo", {}, { timeoutMs: 5000 }));
    expect(err.code).toBe("core_exited");
    await Bun.sleep(200);
    expect(children).toHaveLength(4);
  });
});

describe("giving up", () => {
  test("onFailed tells the host once no core runs nor will, after the last exit's onExit", async () => {
    // Its onExit alone could not tell a crash that a restart follows from the last one.
    const heard: string[] = [];
    let gaveUp = () => {};
    const failed = new Promise<void>((resolve) => (gaveUp = resolve));
    const children: FakeChild[] = [];
    const spawn = () => {
      const child = new FakeChild();
      if (children.length > 0) setImmediate(() => child.exit(1, null));
      children.push(child);
      return child;
    };
    const client: LocalAiClient = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        restart: { maxRestarts: 2, initialDelayMs: 0 },
        onExit: (e) => heard.push(`exit ${e.code}`),
        onRestart: (r) => heard.push(`restart ${r.attempt}`),
        onFailed: (err) => {
          heard.push(`failed ${err.code} ${err.data?.exit_code}`);
          gaveUp();
        },
      }),
    );
    children[0]?.exit(1, null);
    await failed;
    expect((await rejection(client.ping())).code).toBe("core_exited");
    expect(heard).toEqual(["exit 1", "restart 1", "exit 1", "restart 2", "exit 1", "failed core_exited 1"]);
  });

  test("without restarts, an unexpected exit is followed by onFailed; a stop asked for is not", async () => {
    const heard: string[] = [];
    const start = async (child: FakeChild) =>
      track(
        await LocalAiClient.start({
          binary: "local-ai",
          spawn: child.spawn,
          onExit: (e) => heard.push(`exit ${e.expected}`),
          onFailed: (err) => heard.push(`failed ${err.code}`),
        }),
      );
    const crashing = new FakeChild();
    const client = await start(crashing);
    const call = client.request("echo", {}, { timeoutMs: 0 });
    crashing.exit(3, null);
    expect((await rejection(call)).code).toBe("core_exited");
    expect(heard).toEqual(["exit false", "failed core_exited"]);
    heard.length = 0;
    const stops = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: { status: "ok" } }));
    await (await start(stops)).close();
    expect(heard).toEqual(["exit true"]);
  });
});

describe("the restart count's reset", () => {
  test("counts the time a core served, not its start-up: a slow start then a crash is no long run", async () => {
    // Each core's handshake takes 5 s (the clock is moved on as it answers) and it crashes as soon
    // as it is asked anything. Timed from its spawn, each such run outlasted resetAfterMs and wiped
    // the count: a core that never served a call was restarted for good.
    const children: FakeChild[] = [];
    const spawn = () => {
      const child = new FakeChild((req, c) => req.method === "die" && c.exit(1, null));
      Object.defineProperty(child, "initResult", {
        get: () => {
          setSystemTime(new Date(Date.now() + 5000));
          return INIT;
        },
      });
      children.push(child);
      return child;
    };
    try {
      const restart = { maxRestarts: 2, initialDelayMs: 0, resetAfterMs: 1000 };
      const client = track(await LocalAiClient.start({ binary: "local-ai", spawn, restart }));
      for (let i = 0; i < 6; i++) {
        const err = await rejection(client.request("die", {}, { timeoutMs: 10_000 }));
        expect(err.code).toBe("core_exited");
      }
      expect(children).toHaveLength(3);
    } finally {
      setSystemTime();
    }
  });
});

const INIT = {
  protocol_version: 1,
  server: { name: "fake-child", version: "0.0.0" },
  capabilities: { methods: [], events: [] },
};
