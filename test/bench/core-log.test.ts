import { expect, spyOn, test } from "bun:test";
import { firstStepOf } from "../../bench/overhead/core.ts";
import { logger } from "../../src/util/logger.ts";
import { ChatHarness } from "../agent/harness.ts";

// The bench reads the core's own times on a first token from its info log (docs/performance.md,
// "The core's own path"): the line the turn writes, read back as the bench reads it.

test("a chat's first step, as the core logs it, gives the bench its trace, prompt_ms and times", async () => {
  await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
  h.llama.script({ content: ["one", " two"] });
  const lines: string[] = [];
  const info = spyOn(logger, "info").mockImplementation((line: string) => void lines.push(line));
  let result: { trace_id?: string } | undefined;
  try {
    result = (await h.chat("c", { input: "hi" })).terminal.result as { trace_id?: string };
  } finally {
    info.mockRestore();
  }
  const steps = lines.flatMap((l) => firstStepOf(l) ?? []);
  expect(steps).toHaveLength(1);
  expect(steps[0]?.traceId).toBe(result?.trace_id as string);
  expect(steps[0]?.written).toBeLessThan(steps[0]?.first as number);
  expect(steps[0]?.written).toBeGreaterThan(performance.timeOrigin);
});

test("a line of an older build (no `at=`) still gives prompt_ms; other lines nothing", () => {
  const old =
    'trace=ab12 step=0 finish=stop reasoning_tokens=0 usage={} timings={"prompt_n":1,"prompt_ms":1.25}';
  expect(firstStepOf(old)).toEqual({ traceId: "ab12", promptMs: 1.25, written: undefined, first: undefined });
  expect(firstStepOf(old.replace("step=0", "step=1"))).toBeUndefined();
  expect(firstStepOf("llama-server started")).toBeUndefined();
});
