import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// `plan` of an `hf:` model not pulled reads the hub's header, each request bounded by 60 s: a
// hub that takes the connection and says nothing held the core's stop that long, past the
// host's wait (stop grace + 5 s), which then killed the core with llama-server running.
const dir = tmpdir("local-ai-plan-shutdown-");
const saved = { ...process.env };
let asked!: () => void;
const hubAsked = new Promise<void>((r) => {
  asked = r;
});
let givenUp!: () => void;
const hubGivenUp = new Promise<void>((r) => {
  givenUp = r;
});
// A hub that answers nothing until its request is given up.
const hub = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: (req) =>
    new Promise<Response>((resolve) => {
      req.signal.addEventListener("abort", () => {
        givenUp();
        resolve(new Response("gone", { status: 503 }));
      });
      asked();
    }),
});
process.env.HF_ENDPOINT = `http://127.0.0.1:${hub.port}`;
process.env.HF_HUB_CACHE = join(dir.path, "hub");

afterAll(() => {
  for (const key of ["HF_ENDPOINT", "HF_HUB_CACHE"]) {
    if (saved[key] === undefined) delete process.env[key];
    else process.env[key] = saved[key];
  }
  hub.stop(true);
  dir[Symbol.dispose]();
});

describe("plan and the core's stop", () => {
  test("shutdown ends a plan waiting on the hub: cancelled, the hub's request given up", async () => {
    const h = startHarness({ cwd: dir.path });
    h.send({ id: "pl", method: "plan", params: { model: "hf:org/m-GGUF:Q4_K_M" } });
    await hubAsked;
    h.send({ id: "bye", method: "shutdown" });
    expect(await h.exit).toBe(0);
    expect(h.terminal("pl")).toMatchObject({ code: "cancelled", message: "the core is shutting down" });
    expect(h.terminal("bye")).toMatchObject({ type: "result" });
    // The hub sees the connection closed a turn or more later: awaited, not timed.
    await hubGivenUp;
  });
});
