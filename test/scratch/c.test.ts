import { expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "../client/fake-child.ts";

test("failing spawns and kills during start leave no exit hook", async () => {
  for (let i = 0; i < 50; i++) {
    const c = new LocalAiClient({ binary: "/nonexistent/local-ai" });
    await c.start().catch((e) => e);
    await c.close();
  }
  console.log("after ENOENT", process.listenerCount("exit"));
  for (let i = 0; i < 50; i++) {
    const child = new FakeChild();
    child.reading = false;
    const c = new LocalAiClient({ binary: "x", spawn: child.spawn });
    const s = c.start().catch((e) => e.code);
    c.kill();
    console.log(i === 0 ? await s : "");
  }
  await new Promise((r) => setTimeout(r, 50));
  console.log("after kill in start", process.listenerCount("exit"), process.getActiveResourcesInfo());
  for (let i = 0; i < 20; i++) {
    const c = new LocalAiClient({
      binary: process.execPath,
      args: ["-e", "setInterval(()=>{},1000)"],
      requestTimeoutMs: 200,
    });
    const e = await c.start().catch((e) => e);
    if (i === 0) console.log(e.code, e.message);
    await c.close();
  }
  await new Promise((r) => setTimeout(r, 300));
  console.log("after mute real", process.listenerCount("exit"), process.getActiveResourcesInfo());
});
