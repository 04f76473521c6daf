import { expect, spyOn, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readAheadForChat } from "../../src/server/chat-read-ahead.ts";

const config = ConfigSchema.parse({ model: { path: "/m/model.gguf" } });

/** Two turns of the loop: the read-ahead's immediate, then the one after its (stand-in) probe. */
const turns = async () => {
  for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
};

for (const begun of [false, true]) {
  test(`the chat's modules are read ahead ${begun ? "not once a chat has begun" : "while no chat has begun"}`, async () => {
    // A chat sent at once has its own modules and loads its turn's after its spawn: evaluated by
    // the read-ahead too (~25 ms on the one thread), they held its plan's awaits and its spawn.
    let loaded = 0;
    readAheadForChat({
      standIn: true,
      config: () => config,
      store: () => undefined,
      stopping: () => false,
      chatBegun: () => begun,
      loadModules: () => {
        loaded++;
      },
    });
    await turns();
    expect(loaded).toBe(begun ? 0 : 1);
  });
}

test("a shutdown begun while the binary was looked for starts no probe", async () => {
  // initialize then shutdown at once (a host's version check), or the lookup slow on a drive:
  // the probe ahead ran nvidia-smi, rocm-smi and --list-devices for a core on its way out.
  const asked = await import("../../src/config/find-binary-asked.ts");
  const { probeAhead } = await import("../../src/models/local-plan-deps.ts");
  let found: (path: string) => void = () => {};
  const lookup = spyOn(asked, "llamaServerAsked").mockImplementation(
    () =>
      new Promise<string | undefined>((r) => {
        found = r;
      }),
  );
  const start = spyOn(probeAhead, "start").mockImplementation(() => {});
  try {
    let stopping = false;
    const deps = {
      standIn: false,
      config: () => config,
      store: () => undefined,
      stopping: () => stopping,
      loadModules: () => {},
    };
    readAheadForChat(deps);
    await turns();
    expect(lookup).toHaveBeenCalledTimes(1);
    stopping = true;
    found("/opt/llama/bin/llama-server");
    await turns();
    expect(start).not.toHaveBeenCalled();
    // Not stopping: the probe is begun (the test can fail).
    stopping = false;
    readAheadForChat(deps);
    await turns();
    found("/opt/llama/bin/llama-server");
    await turns();
    expect(start).toHaveBeenCalledTimes(1);
  } finally {
    lookup.mockRestore();
    start.mockRestore();
  }
});
