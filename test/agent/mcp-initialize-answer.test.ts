import { expect, test } from "bun:test";
import { initializeEssentials } from "../../src/agent/mcp/initialize-answer.ts";

// The SDK's client keeps what initialize answered for the server's life (its instructions and
// serverInfo), which the core never reads: a line of up to 16 MiB each start, held.
test("an initialize answer's 10 MB instructions and server name are not kept for the server's life", () => {
  const big = "i".repeat(10_000_000);
  const kept = initializeEssentials({
    protocolVersion: "2025-06-18",
    capabilities: { tools: {} },
    serverInfo: { name: big, version: big },
    instructions: big,
  }) as { serverInfo: { name: string; version: string }; instructions?: string };
  expect(kept.instructions ?? "").toHaveLength(0);
  expect(kept.serverInfo.name.length).toBeLessThanOrEqual(256);
  expect(kept.serverInfo.version.length).toBeLessThanOrEqual(256);
});

test("a server name or version that is no string is left for the SDK's schema to refuse", () => {
  const kept = initializeEssentials({ protocolVersion: "x", capabilities: {}, serverInfo: { name: 7 } }) as {
    serverInfo: { name: unknown };
  };
  expect(kept.serverInfo.name).toBe(7);
});
