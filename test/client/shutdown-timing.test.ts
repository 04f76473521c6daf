import { describe, expect, test } from "bun:test";
import { EOF_GRACE_MS, TERM_GRACE_MS } from "../../src/agent/mcp/child.ts";
import {
  CORE_STOP_MARGIN_MS,
  DEFAULT_CORE_STOP_GRACE_MS,
  EXIT_AFTER_ANSWER_MS,
  shutdownKillAt,
} from "../../src/client/shutdown-timing.ts";
import { LlamaSchema } from "../../src/config/schema.ts";
import { STOP_GRACE_MS } from "../../src/protocol/method-table.ts";

const T0 = 1_000_000;

describe("shutdownKillAt", () => {
  test("a core that has not answered is given its stop grace plus the margin, whatever timeoutMs", () => {
    const at = shutdownKillAt({ startedAt: T0, timeoutMs: 1000, stopGraceMs: 3000 });
    expect(at - T0).toBe(3000 + CORE_STOP_MARGIN_MS);
    // A host whose config raised llama.stop_grace_s says so, and the floor follows.
    expect(shutdownKillAt({ startedAt: T0, timeoutMs: 0, stopGraceMs: 30_000 }) - T0).toBe(
      30_000 + CORE_STOP_MARGIN_MS,
    );
  });

  test("a timeoutMs longer than the floor is kept", () => {
    expect(shutdownKillAt({ startedAt: T0, timeoutMs: 20_000, stopGraceMs: 3000 }) - T0).toBe(20_000);
  });

  test("once the core answered, timeoutMs rules again, with a moment left to exit", () => {
    const answeredAt = T0 + 50;
    expect(shutdownKillAt({ startedAt: T0, timeoutMs: 300, stopGraceMs: 3000, answeredAt })).toBe(
      answeredAt + EXIT_AFTER_ANSWER_MS,
    );
    expect(shutdownKillAt({ startedAt: T0, timeoutMs: 5000, stopGraceMs: 3000, answeredAt }) - T0).toBe(5000);
  });

  test("the client's default grace is the core's default llama.stop_grace_s", () => {
    expect(DEFAULT_CORE_STOP_GRACE_MS).toBe(LlamaSchema.parse({}).stop_grace_s * 1000);
  });

  test("the margin covers the core's stop beside llama-server's grace: its own grace, then a hung MCP server", () => {
    // In order: work `cancel` cannot reach (models, plan…) gets STOP_GRACE_MS, then the services
    // stop, a hung MCP server its EOF and TERM graces; a second is left to answer and exit.
    // With llama.stop_grace_s 0 the client's wait is the margin alone.
    expect(CORE_STOP_MARGIN_MS).toBeGreaterThanOrEqual(STOP_GRACE_MS + EOF_GRACE_MS + TERM_GRACE_MS + 1000);
  });
});
