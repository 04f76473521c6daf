import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { hostileServer, manyToolsServer } from "../fixtures/mcp-hostile.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { ChatHarness } from "./harness.ts";

// A tool whose input schema llama-server's grammar converter refuses (a $ref to another document)
// fails every request that offers it, the whole request and /apply-template alike
// (test/fixtures/llama-server/transcripts/95e). The turn finds it, leaves it out with a
// tools_unavailable warning and sends the step again; later turns leave it out at once.

type Json = Record<string, any>;
const toolNames = (body: Json) => ((body.tools ?? []) as Json[]).map((t) => t.function.name as string);
/** An agent whose one MCP server lists `echo` and `remote`, whose input schema llama-server refuses. */
const refusingAgent = (scratch: string) => ({
  agents: [{ name: "a", system_prompt: "Be brief.", tools: ["h.*"] }],
  mcp_servers: [hostileServer("remote-ref-input", join(scratch, "pids"), 20)],
});

describe("a tool llama-server cannot offer", () => {
  test("is left out with a warning, the step sent again; the next turn leaves it out without a failed request", async () => {
    using scratch = tmpdir();
    await using h = new ChatHarness(refusingAgent(scratch.path));
    h.llama.script({ content: "first" }, { content: "second" });
    const first = await h.chat(1, { session_id: "s", input: "go" });
    expect(first.terminal.type).toBe("result");
    expect((first.terminal.result as Json).response).toBe("first");
    const warnings = (first.terminal.result as Json).warnings as Json[];
    expect(warnings).toContainEqual({
      code: "tools_unavailable",
      message: expect.stringContaining("remote"),
    });
    expect(warnings.find((w) => w.code === "tools_unavailable")?.message).toContain("Unsupported ref");
    const [refused, sent] = h.llama.requests.map((r) => toolNames(r.body as Json));
    expect(refused).toHaveLength(2);
    expect(sent).toHaveLength(1);
    expect(sent?.[0]).not.toContain("remote");

    const before = h.llama.requests.length;
    const second = await h.chat(2, { session_id: "s", input: "again" });
    expect((second.terminal.result as Json).response).toBe("second");
    expect((second.terminal.result as Json).warnings).toContainEqual({
      code: "tools_unavailable",
      message: expect.stringContaining("remote"),
    });
    expect(h.llama.requests.length - before).toBe(1);
    expect(toolNames(h.llama.requests.at(-1)?.body as Json)).toHaveLength(1);
  }, 60_000);
});

describe("a tool whose grammar llama-server makes but cannot parse (95f)", () => {
  // /apply-template takes the body (it never parses a grammar): each tool's schema is then tried
  // alone as /completion's json_schema, nothing predicted, in the turn's own slot.
  test("is found by a /completion probe, left out with a warning, and the step sent again", async () => {
    using scratch = tmpdir();
    await using h = new ChatHarness({
      agents: [{ name: "a", system_prompt: "Be brief.", tools: ["h.*"] }],
      mcp_servers: [hostileServer("repetition-input", join(scratch.path, "pids"), 20)],
    });
    h.llama.script({ content: "first" }, { content: "second" });
    const first = await h.chat(1, { session_id: "s", input: "go" });
    expect(first.terminal.type).toBe("result");
    expect((first.terminal.result as Json).response).toBe("first");
    const warning = ((first.terminal.result as Json).warnings as Json[]).find(
      (w) => w.code === "tools_unavailable",
    );
    expect(warning?.message).toContain("many");
    expect(warning?.message).toContain("failed to parse grammar");
    const chats = h.llama.requests.filter(
      (r) => Array.isArray((r.body as Json).messages) && "stream" in (r.body as Json),
    );
    const [refused, sent] = chats.map((r) => toolNames(r.body as Json));
    expect(refused).toEqual(["h__echo", "h__many"]);
    expect(sent).toEqual(["h__echo"]);
    // One probe a tool, each its schema alone with nothing to predict.
    const probes = h.llama.requests.filter((r) => "json_schema" in (r.body as Json));
    expect(probes.map((r) => (r.body as Json).n_predict)).toEqual([0, 0]);
    // Kept for the server's life: the next turn leaves it out with no failed request or probe.
    const before = h.llama.requests.length;
    const second = await h.chat(2, { session_id: "s", input: "again" });
    expect((second.terminal.result as Json).response).toBe("second");
    expect(h.llama.requests.length - before).toBe(1);
  }, 60_000);
});

describe("a tool llama-server cannot offer, then a prompt the other tools overflow", () => {
  test("the error shares the tools' tokens among the servers of the tools sent, not of those left out", async () => {
    // The request's tools, less those left out, were read against the agent's tools by
    // position (tools-cost.ts): each tool after the one left out was counted to the server
    // before it, here one of g's 128 to h.
    using scratch = tmpdir();
    await using h = new ChatHarness(
      {
        agents: [{ name: "a", tools: ["h.*", "g.*"] }],
        mcp_servers: [
          hostileServer("remote-ref-input", join(scratch.path, "pids"), 20),
          manyToolsServer("g", 128),
        ],
      },
      { standIn: () => ({ nCtx: 2048 }) },
    );
    const { terminal } = await h.chat(1, { session_id: "s", input: "go" });
    expect(terminal).toMatchObject({ type: "error", data: { reason: "context_overflow" } });
    const message = String(terminal.message);
    expect(message).toContain("the 129 tools");
    expect(message).toMatch(/'g' 128 tools, about \d+ tokens; 'h' 1 tools/);
  }, 60_000);
});

describe("a tool llama-server cannot offer, named by the model all the same", () => {
  test("is not run: the call is answered as a tool not available", async () => {
    using scratch = tmpdir();
    await using h = new ChatHarness(refusingAgent(scratch.path));
    h.llama.script(
      { tool_calls: [{ name: "h__remote", arguments: { a: "x" }, id: "call1" }] },
      { content: "done" },
    );
    const { terminal, events } = await h.chat(1, { session_id: "s", input: "go" });
    expect((terminal.result as Json).response).toBe("done");
    const done = events.find((e) => e.event === "tool_done");
    expect(done).toMatchObject({ tool: "h__remote", status: "error", preview: "tool not available" });
  }, 60_000);
});
