import { describe, expect, test } from "bun:test";
import { dropKnownRefused, dropRefusedTools, refusalsKept } from "../../../src/agent/turn/tool-refusals.ts";
import type { Warning } from "../../../src/protocol/chat.ts";

// The search for the tools llama-server refuses (tool-refusals.ts), against a server that answers
// /apply-template as `judge` says: a 400 of the grammar converter, as the real one's (95e), or a
// prompt.

type Body = { tools?: { function: { name: string; parameters: unknown } }[] };
const REFUSED = "Unable to generate parser for this template. Automatic parser generation failed: ";

function server(judge: (body: Body) => string | null) {
  const probes: Body[] = [];
  const http = Bun.serve({
    port: 0,
    async fetch(req) {
      const body = (await req.json()) as Body;
      probes.push(body);
      const why = judge(body);
      if (why === null) return Response.json({ prompt: "p" });
      return Response.json({ error: { code: 400, message: REFUSED + why } }, { status: 400 });
    },
  });
  return {
    endpoint: { baseUrl: `http://127.0.0.1:${http.port}`, apiKey: "key" },
    probes,
    [Symbol.dispose]: () => http.stop(true),
  };
}

const tool = (name: string, parameters: unknown = { type: "object" }) => ({
  type: "function",
  function: { name, parameters },
});
const never = new AbortController().signal;

describe("the tools llama-server refuses", () => {
  test("a server that refuses every request, tools or none, has no tool blamed nor kept as refused", async () => {
    // The autoparser runs for every request (common/chat.cpp): a template it cannot analyse, or a
    // think field that upsets it, is refused alike without tools. Blaming each tool kept them all
    // out of every later turn of that server, those that would have worked included.
    using s = server(() => "JSON schema conversion failed:\nsomething not about tools");
    const launch = {};
    const tools = [tool("a"), tool("b")];
    const warnings: Warning[] = [];
    expect(await dropRefusedTools(s.endpoint, launch, tools, {}, warnings, never)).toBe(0);
    expect(tools).toHaveLength(2);
    expect(warnings).toEqual([]);
    const later = [tool("a"), tool("b")];
    dropKnownRefused(launch, later, warnings);
    expect(later).toHaveLength(2);
  });
});

describe("what a server's refusals keep", () => {
  test("tool lists that change (an MCP server restarted with new schemas): the refusals kept stay bounded, each reason cut", async () => {
    using s = server((body) => {
      const bad = (body.tools ?? []).find((t) => t.function.name.startsWith("bad"));
      return bad ? `JSON schema conversion failed:\n${"y".repeat(8000)}` : null;
    });
    const launch = {};
    for (let round = 0; round < 20; round++) {
      const tools = Array.from({ length: 50 }, (_, i) => tool(`bad${round}_${i}`));
      expect(await dropRefusedTools(s.endpoint, launch, tools, {}, [], never)).toBe(50);
    }
    const kept = refusalsKept(launch);
    expect(kept.count).toBeLessThanOrEqual(256);
    expect(kept.reasonChars).toBeLessThanOrEqual(kept.count * 300);
    // The latest are still known: left out without a probe.
    const again = [tool("bad19_0"), tool("good")];
    const warnings: Warning[] = [];
    dropKnownRefused(launch, again, warnings);
    expect(again.map((t) => t.function.name)).toEqual(["good"]);
    expect(warnings[0]?.message).toContain(`${"y".repeat(200)}…`);
  });
});

describe("the warning for refused tools", () => {
  test("is one per turn, a few names and the reason cut, though the server's reason quotes each whole schema", async () => {
    // The real converter's reason for a ref that leads nowhere quotes the whole schema (up to
    // 16 384 characters from an MCP server, tool-list.ts): one warning per tool, uncut, put up to
    // 128 such schemas of a hostile server into every result of the agent.
    using s = server((body) => {
      const bad = (body.tools ?? []).find((t) => t.function.name.startsWith("bad"));
      return bad
        ? `JSON schema conversion failed:\nError resolving ref: not in ${JSON.stringify(bad.function.parameters)}`
        : null;
    });
    const big = { type: "object", properties: { q: { $ref: "#/$defs/x" } }, description: "x".repeat(16_000) };
    const tools = [tool("good"), ...Array.from({ length: 6 }, (_, i) => tool(`bad${i}`, big))];
    const warnings: Warning[] = [];
    expect(await dropRefusedTools(s.endpoint, {}, tools, {}, warnings, never)).toBe(6);
    expect(tools.map((t) => t.function.name)).toEqual(["good"]);
    expect(warnings).toHaveLength(1);
    const message = warnings[0]?.message ?? "";
    expect(message).toContain("6 tools");
    expect(message).toContain("bad0");
    expect(message).toContain("Error resolving ref");
    expect(message.length).toBeLessThan(1000);
  });
});
