import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { mayRetry } from "../../src/agent/mcp/call-result.ts";
import type { ChildExit, McpChild } from "../../src/agent/mcp/child.ts";
import { ChildTransport } from "../../src/agent/mcp/child-transport.ts";
import { MAX_LINE_BYTES } from "../../src/agent/mcp/line-reader.ts";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import {
  MAX_DESCRIPTION_CHARS,
  MAX_LIST_PAGES,
  MAX_TOOLS_PER_SERVER,
} from "../../src/agent/mcp/tool-list.ts";
import { resolveTools } from "../../src/agent/tool-registry.ts";
import { McpServerSchema } from "../../src/config/schema.ts";
import { MAX_JSON_DEPTH } from "../../src/util/json-depth.ts";
import { MAX_VALUES } from "../../src/util/json-shape.ts";
import { MAX_TIMER_MS } from "../../src/util/timer-limit.ts";
import { loopLag } from "../fixtures/loop-lag.ts";
import { HOSTILE_SERVER, hostileServer, pidsIn } from "../fixtures/mcp-hostile.ts";
import { calling, silentChild } from "../fixtures/mcp-silent-child.ts";
import { alive } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { ChatHarness } from "./harness.ts";

const never = new AbortController().signal;
const hostile = (mode: string, pids: string, timeout_s = 30) => hostileServer(mode, pids, timeout_s);

/** A pool of one hostile server in `mode` (its pids recorded in `pids`), closed once `use` ends. */
async function withHostile(
  mode: string,
  use: (pool: McpPool, pids: string) => Promise<void>,
  timeoutS?: number,
): Promise<void> {
  using scratch = tmpdir();
  const pids = join(scratch.path, "pids");
  const pool = new McpPool([hostile(mode, pids, timeoutS)], Date.now);
  try {
    await use(pool, pids);
  } finally {
    await pool.close();
  }
}

/**
 * What `work` gives, the main loop never held 2 s meanwhile: a backstop a loaded machine does not
 * reach. What each test below catches is in what `work` gives: the SDK's schemas and
 * JSON.stringify, which held the loop for a second and more on these answers, refused them (the
 * call or the start failed); the cheap way answers with what the test expects.
 */
async function unheld<T>(work: () => Promise<T>): Promise<T> {
  const lag = loopLag();
  const out = await work();
  expect(lag.stop()).toBeLessThan(2000);
  return out;
}

describe("MCP servers that do not read their stdin", () => {
  test("a server that floods requests and stops reading is killed once 64 KiB wait for it, and restarted on next use", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    // Without the cap this call waits timeout_s while the SDK's answers pile up in memory.
    const pool = new McpPool([hostile("flood-requests", pids, 2)], Date.now, undefined, {
      maxPendingBytes: 64 * 1024,
    });
    try {
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(ErrorCode.ConnectionClosed);
      const [first] = pidsIn(pids);
      expect(await waitFor(() => !alive(first as number))).toBe(true);
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
      expect(pidsIn(pids)).toHaveLength(2);
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("a server whose call outlasted timeout_s (it floods but reads) is killed, not kept busy for the core's life", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    // The budget on what it sends unasked would stop it first (mcp-unasked.test.ts): out of the way here.
    const unasked = { burstBytes: 2 ** 40, bytesPerSecond: 2 ** 40 };
    const pool = new McpPool([hostile("flood-requests-read", pids, 1)], Date.now, undefined, { unasked });
    try {
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect((err as McpError).code).toBe(ErrorCode.RequestTimeout);
      expect(await waitFor(() => !alive(pidsIn(pids)[0] as number), { timeoutMs: 3000 })).toBe(true);
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("an answer of 300,000 parts fails its call unparsed; the server serves the next", async () => {
    using scratch = tmpdir();
    const pool = new McpPool([hostile("many-parts", join(scratch.path, "pids"))], Date.now);
    try {
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).message).toContain(`at most ${MAX_VALUES} are read`);
      // The server answered (the tool ran): the same call is answered so again.
      expect(mayRetry(err)).toBe(false);
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
    } finally {
      await pool.close();
    }
  }, 30_000);

  // Each part the SDK's schema refused cost a union's worth of issues: 1.5 s of the main loop
  // and a 560 MB error message for 450,000 of them (now counted first, over 64 KiB); 30,000 in a
  // line too short to be counted still failed the call.
  test("a result of 30,000 parts that are no content is read without holding the main loop", async () => {
    await withHostile("bad-parts", async (pool) => {
      await pool.tools("h", never);
      const out = await unheld(() => pool.call("h", "echo", {}, never));
      expect(out.isError).toBe(false);
      expect(out.text.startsWith("ok\n[content]\n")).toBe(true);
    });
  }, 30_000);

  // The SDK's schema made each an issue: about 1 s of the main loop and an 88 MB message, every
  // start, for 450,000 (now counted first, over 64 KiB); 30,000 in a line too short to be counted
  // still failed the start.
  for (const mode of ["icons", "icons-string-id"])
    test(`an initialize answer of 30,000 icons that are no icons starts, without holding the main loop (${mode})`, async () => {
      await withHostile(mode, async (pool) => {
        const tools = await unheld(() => pool.tools("h", never));
        expect(tools.map((t) => t.name)).toEqual(["echo"]);
      });
    }, 30_000);

  test("a server that closed its stdin is killed at the first write that fails, and started afresh", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "pids");
    const pool = new McpPool([hostile("close-stdin", pids, 20)], Date.now);
    try {
      await pool.tools("h", never);
      // It closes its stdin just after its answer to tools/list.
      await Bun.sleep(300);
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect((err as Error).message).toContain("MCP server 'h' was stopped: its stdin is closed (EPIPE");
      expect(await waitFor(() => !alive(pidsIn(pids)[0] as number))).toBe(true);
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
      expect(pidsIn(pids)).toHaveLength(2);
      await Bun.sleep(300);
      // A message the pipe cannot take at once: its EPIPE was a rejection no code handled, and
      // the call waited out timeout_s.
      const big = await pool.call("h", "echo", { a: "x".repeat(200_000) }, never).catch((e: unknown) => e);
      expect((big as Error).message).toContain("its stdin is closed (EPIPE");
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("a server that exits as the core writes a call to it is told by its exit, not killed for a closed stdin", async () => {
    await withHostile("exit-mid-call", async (pool) => {
      await pool.tools("h", never);
      // More than the pipe takes at once: the write is still under way when it exits (EPIPE).
      const err = await pool.call("h", "echo", { a: "x".repeat(900_000) }, never).catch((e: unknown) => e);
      expect((err as Error).message).toEndWith("MCP server 'h' exited with code 7");
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
    });
  }, 30_000);

  test("a write that fails (EPIPE) a moment before the server's exit is seen names the exit, and ends the connection as an exit", async () => {
    let killed = 0;
    const exit = Promise.withResolvers<ChildExit>();
    const child: McpChild = {
      ...silentChild(),
      exited: exit.promise,
      write: async () => {
        // Its exit is reported only after the write has failed.
        queueMicrotask(() => exit.resolve({ code: null, signal: "SIGSEGV" }));
        throw new Error("EPIPE: broken pipe, write");
      },
      kill: () => {
        killed++;
      },
    };
    const transport = new ChildTransport(child, "t", { maxPendingBytes: 1 << 20, stallMs: 5000 });
    const closed = Promise.withResolvers<void>();
    transport.onclose = () => closed.resolve();
    await transport.start();
    const sent = transport.send({ jsonrpc: "2.0", id: 0, method: "tools/call", params: { name: "x" } });
    await expect(sent).rejects.toThrow("MCP server 't' was ended by SIGSEGV");
    await closed.promise;
    expect(killed).toBe(0);
    expect(transport.stoppedFor).toBeUndefined();
    expect(transport.exitedAs).toBe("was ended by SIGSEGV");
  });

  test("an answer over the 16 MiB line limit fails its call saying so, and the server is killed", async () => {
    await withHostile("huge-line", async (pool) => {
      await pool.tools("h", never);
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect((err as McpError).message).toContain(
        `MCP server 'h' was stopped: reading its stdout failed: a line longer than ${MAX_LINE_BYTES} bytes`,
      );
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo"]);
    });
  }, 30_000);

  test("a server killed during its start says why in the start's error", async () => {
    await withHostile("huge-init", async (pool) => {
      const err = await pool.tools("h", never).catch((e: unknown) => e);
      expect((err as Error).message).toContain(
        `MCP server 'h' could not be started: it was stopped: reading its stdout failed: a line longer than ${MAX_LINE_BYTES} bytes`,
      );
    });
  }, 30_000);

  // JSON.stringify recurses: each RangeError it threw on them held the main loop 0.6 s.
  test("an input schema or a structured result nested 60,000 deep costs its place, not the main loop", async () => {
    await withHostile("deep", async (pool) => {
      const listing = await unheld(() => pool.listing("h", never));
      expect(listing.tools.map((t) => t.name)).toEqual(["echo"]);
      expect(listing.dropped).toContain(`nested over ${MAX_JSON_DEPTH} levels ("deep")`);
      const out = await unheld(() => pool.call("h", "echo", {}, never));
      expect(out.text).toBe(`[structured content nested over ${MAX_JSON_DEPTH} levels]`);
    });
  }, 30_000);

  test("a request of the server's own of many values is skipped, not taken for the answer to our call of its id", async () => {
    const { line: write, got } = await calling();
    const line = (o: unknown) => write(JSON.stringify(o));
    line({
      jsonrpc: "2.0",
      id: 0,
      method: "sampling/createMessage",
      params: { messages: Array(600_000).fill(0) },
    });
    line({ jsonrpc: "2.0", id: 0, result: { content: [] } });
    await waitFor(() => got.length > 0);
    expect(got).toEqual([{ jsonrpc: "2.0", id: 0, result: { content: [] } }]);
  });

  test("a write to its stdin stuck past stallMs ends the connection and kills the server", async () => {
    let killed = 0;
    const child: McpChild = {
      ...silentChild(),
      write: () => new Promise<void>(() => {}), // the pipe never drains
      kill: () => {
        killed++;
      },
    };
    const transport = new ChildTransport(child, "t", { maxPendingBytes: 1 << 20, stallMs: 50 });
    let closed = false;
    transport.onclose = () => {
      closed = true;
    };
    await transport.start();
    void transport.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    expect(await waitFor(() => closed, { timeoutMs: 5000 })).toBe(true);
    expect(killed).toBe(1);
    await expect(transport.send({ jsonrpc: "2.0", method: "x" })).rejects.toThrow("Not connected");
  });

  test("1,000 cancelled calls a server never answers (as MCP asks) leave a bounded number of ids awaited", async () => {
    const transport = new ChildTransport(silentChild(), "t", { maxPendingBytes: 1 << 20, stallMs: 5000 });
    await transport.start();
    for (let id = 0; id < 1000; id++) {
      await transport.send({
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params: { name: "x", arguments: {} },
      });
      await transport.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: id, reason: "the chat was cancelled" },
      });
    }
    expect(transport.awaiting).toBeLessThanOrEqual(64);
    // A call still running is awaited whatever was cancelled before it.
    await transport.send({
      jsonrpc: "2.0",
      id: 1000,
      method: "tools/call",
      params: { name: "x", arguments: {} },
    });
    expect(transport.awaiting).toBeGreaterThan(0);
  });

  test("a cancelled call's answer is asked for no longer than its timeout: the early refusal of a flood comes back", async () => {
    const cancelledCall = async (stallMs: number) => {
      const transport = new ChildTransport(silentChild(), "t", { maxPendingBytes: 1 << 20, stallMs });
      await transport.start();
      await transport.send({
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: { name: "x", arguments: {} },
      });
      await transport.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } });
      return transport;
    };
    // Within its timeout an answer crossing the cancel is still asked for.
    const patient = await cancelledCall(600_000);
    const quick = await cancelledCall(20);
    await Bun.sleep(100);
    expect(patient.awaiting).toBe(1);
    expect(quick.awaiting).toBe(0);
  });

  test("an answer to a call cancelled longer ago than its timeout is charged as unasked, in the first chunk", async () => {
    let push!: (bytes: Uint8Array) => void;
    const stdout = new ReadableStream<Uint8Array>({
      start(c) {
        push = (bytes) => c.enqueue(bytes);
      },
    });
    let killed = 0;
    const child: McpChild = { ...silentChild(), stdout, kill: () => void killed++ };
    // A timeout of 0: the cancel is past it at once, with no wait.
    const unasked = { burstBytes: 1000, bytesPerSecond: 1 };
    const transport = new ChildTransport(child, "t", { maxPendingBytes: 1 << 20, stallMs: 0, unasked });
    const got: unknown[] = [];
    transport.onmessage = (m) => void got.push(m);
    await transport.start();
    await transport.send({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "x", arguments: {} },
    });
    await transport.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 7 } });
    // Its answer, over the unasked budget, comes whole in one chunk: before the fix it was taken
    // as asked for (the late id forgotten only after the chunk's lines were delivered).
    const answer = { jsonrpc: "2.0", id: 7, result: { content: [{ type: "text", text: "x".repeat(5000) }] } };
    push(new TextEncoder().encode(`${JSON.stringify(answer)}\n`));
    await waitFor(() => got.length > 0 || killed > 0);
    expect(killed).toBe(1);
    expect(transport.stoppedFor).toContain("it sent more than any call asked for");
    expect(got).toEqual([]);
  });
});

/** A server that says nothing and never exits: what the core sends it is all there is. */

type Result = { response: string; warnings: { code: string; message: string }[] };
type SentTool = { function: { name: string; description: string } };

describe("MCP servers that answer or ask what a call does not expect", () => {
  test("a server's own error answer of code -32001 fails the call without the server being killed", async () => {
    await withHostile("timeout-error", async (pool, pids) => {
      for (let i = 0; i < 2; i++) {
        const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
        expect((err as McpError).code).toBe(ErrorCode.RequestTimeout);
        expect((err as McpError).message).toContain("upstream timed out");
      }
      // Killed for a timeout it never had, it was started again for the second call.
      expect(pidsIn(pids)).toHaveLength(1);
    });
  }, 30_000);

  test("a call under the longest timeout_s a config allows is answered, not timed out at once", async () => {
    // The SDK's backstop past the call's own clock must still fit a timer, or it fires at once.
    const longest = Math.floor(MAX_TIMER_MS / 1000);
    await withHostile(
      "",
      async (pool) => expect((await pool.call("h", "echo", { a: 1 }, never)).text).toBe('echo {"a":1}'),
      longest,
    );
  }, 30_000);

  test("an answer the SDK's schema refuses fails its call at once, saying why; the server serves the next", async () => {
    // Skipped as a bad line, the call waited out timeout_s and the server was killed.
    await withHostile(
      "null-error-call",
      async (pool, pids) => {
        for (let i = 0; i < 2; i++) {
          const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
          expect((err as McpError).code).toBe(ErrorCode.InternalError);
          expect((err as McpError).message).toContain("not a valid JSON-RPC answer");
          expect((err as McpError).message).toContain('"error"');
        }
        expect(pidsIn(pids)).toHaveLength(1);
      },
      5,
    );
  }, 30_000);

  // MCP's isError is a boolean: read as `=== true`, the string counted the tool's error as its result.
  test('a result whose isError is "true" (a string) fails its call, saying why, not a success', async () => {
    await withHostile("string-is-error", async (pool, pids) => {
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(ErrorCode.InternalError);
      expect((err as McpError).message).toContain("not a valid tools/call result");
      expect((err as McpError).message).toContain("isError");
      expect(pidsIn(pids)).toHaveLength(1);
    });
  }, 30_000);

  // It answered (the tool ran): as for isError, not worth a retry, and said as the isError case says it.
  test("a result whose content is no list fails its call, saying why, not retryable", async () => {
    await withHostile("string-content", async (pool, pids) => {
      const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).message).toContain(
        "not a valid tools/call result (content: a list was expected, not a string)",
      );
      expect(mayRetry(err)).toBe(false);
      expect(pidsIn(pids)).toHaveLength(1);
    });
  }, 30_000);

  // As for a content that is no list: the server answered (the tool ran), and would answer so again.
  test("a result that is no object fails its call, saying why, not retryable", async () => {
    for (const [mode, kind] of [
      ["result-string", "string"],
      ["result-array", "object"],
      ["result-null", "object"],
    ] as const) {
      await withHostile(mode, async (pool, pids) => {
        const err = await pool.call("h", "echo", {}, never).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(McpError);
        expect((err as McpError).message).toContain("not a valid JSON-RPC answer");
        expect((err as McpError).message).toContain(kind);
        expect(mayRetry(err)).toBe(false);
        expect(pidsIn(pids)).toHaveLength(1);
      });
    }
  }, 30_000);

  test("a server whose every answer the SDK's schema refuses fails its start at once, saying why", async () => {
    await withHostile("null-error", async (pool) => {
      const err = await pool.tools("h", never).catch((e: unknown) => e);
      expect((err as Error).message).toContain("could not be started");
      expect((err as Error).message).toContain("not a valid JSON-RPC answer");
    });
  }, 30_000);

  test("a server's own requests are refused at once (sampling, roots, elicitation), ping answered; its call ends", async () => {
    await withHostile("asks", async (pool) => {
      const out = await pool.call("h", "echo", {}, never);
      const byMethod = JSON.parse(out.text) as Record<string, { result?: unknown; error?: { code: number } }>;
      // The core offers the server no model, none of the host's folders and no user to ask.
      for (const method of ["sampling/createMessage", "roots/list", "elicitation/create"])
        expect(byMethod[method]?.error?.code).toBe(ErrorCode.MethodNotFound);
      expect(byMethod.ping).toMatchObject({ result: {} });
    });
  }, 30_000);
});

describe("MCP tool lists that are unfit to offer", () => {
  test("odd names, a duplicate and a huge schema are left out with a warning; a huge description is cut", async () => {
    using scratch = tmpdir();
    await using h = new ChatHarness({
      agents: [{ name: "a", tools: ["h.*"] }],
      mcp_servers: [
        { ...hostile("odd-names", join(scratch.path, "pids")), env: { MCP_HOSTILE_MODE: "odd-names" } },
      ],
    });
    h.llama.script({ content: ["fine"] });
    const { terminal } = await h.chat("c", { input: "hi" });
    const result = terminal.result as Result;
    expect(result.response).toBe("fine");
    expect(result.warnings.map((w) => w.code)).toEqual(["tools_unavailable"]);
    expect(result.warnings[0]?.message).toContain("6 of the 8 tools it listed were left out");
    expect(result.warnings[0]?.message).toContain("the turn ran with the rest");
    expect(result.warnings[0]?.message.length).toBeLessThan(1000);
    const tools = (h.llama.requests[0]?.body.tools ?? []) as SentTool[];
    expect(tools.map((t) => t.function.name)).toEqual(["h__echo", "h__wordy"]);
    expect(tools[1]?.function.description.length).toBe(MAX_DESCRIPTION_CHARS);
    expect(JSON.stringify(h.llama.requests[0]?.body).length).toBeLessThan(20_000);
  }, 30_000);

  test("20 000 tools: the first 128 are offered, the chat answers, the rest cost a warning", async () => {
    await using h = new ChatHarness({
      agents: [{ name: "a", tools: ["h.*"] }],
      mcp_servers: [
        {
          name: "h",
          command: process.execPath,
          args: [HOSTILE_SERVER],
          env: { MCP_HOSTILE_MODE: "many-tools" },
        },
      ],
    });
    h.llama.script({ content: ["fine"] });
    const { terminal } = await h.chat("c", { input: "hi" });
    const result = terminal.result as Result;
    expect(result.response).toBe("fine");
    expect(result.warnings[0]?.message).toContain("19872 of the 20000 tools it listed were left out");
    expect(h.llama.requests[0]?.body.tools).toHaveLength(MAX_TOOLS_PER_SERVER);
  }, 30_000);

  test("a list in pages is read page by page: the tools past the first page are offered too", async () => {
    await withHostile("paged", async (pool) => {
      expect((await pool.tools("h", never)).map((t) => t.name)).toEqual(["echo", "page1", "page2"]);
    });
  }, 30_000);

  test("a later page the server refuses keeps the pages read, with a warning: its start does not fail", async () => {
    await withHostile("paged-error", async (pool) => {
      const listed = await pool.listing("h", never);
      expect(listed.tools.map((t) => t.name)).toEqual(["echo"]);
      expect(listed.dropped).toContain("Invalid cursor");
    });
  }, 30_000);

  test("a later page's refusal that quotes the server's key is no warning with it", async () => {
    using scratch = tmpdir();
    const key = "sk-upstream-0123456789abcdef";
    const cfg = hostile("paged-error", join(scratch.path, "pids"));
    const pool = new McpPool([{ ...cfg, env: { ...cfg.env, UPSTREAM_KEY: key } }], Date.now);
    try {
      const listed = await pool.listing("h", never);
      expect(listed.dropped).toContain("api_key=[redacted]");
      expect(listed.dropped).not.toContain(key.slice(0, 8));
    } finally {
      await pool.close();
    }
  }, 30_000);

  // Quoted in every chat's tools_unavailable warning: a lone surrogate there is a line a host's
  // strict JSON reader (serde_json, say) refuses whole.
  test("a later page's refusal that ends in half an emoji is quoted as well-formed text", async () => {
    using scratch = tmpdir();
    const cfg = hostile("paged-error", join(scratch.path, "pids"));
    const pool = new McpPool([{ ...cfg, env: { ...cfg.env, HALF_EMOJI: "1" } }], Date.now);
    try {
      const listed = await pool.listing("h", never);
      expect(listed.dropped).toContain("Invalid cursor");
      expect(listed.dropped?.isWellFormed()).toBe(true);
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("an empty next cursor ends the list: the first page is not asked for again", async () => {
    await withHostile("paged-empty-cursor", async (pool) => {
      const listed = await pool.listing("h", never);
      expect(listed.tools.map((t) => t.name)).toEqual(["echo"]);
      expect(listed.dropped).toBeNull();
    });
  }, 30_000);

  test("a list whose pages never end is read for MAX_LIST_PAGES pages, with a warning", async () => {
    await withHostile("paged-forever", async (pool) => {
      const listed = await pool.listing("h", never);
      expect(listed.tools).toHaveLength(MAX_LIST_PAGES);
      expect(listed.dropped).toContain(`more than the ${MAX_LIST_PAGES} pages read`);
    });
  }, 30_000);

  test("two servers whose tools make one function name: the first keeps it, the other is reported", async () => {
    const tool = (name: string) => ({ name, description: "", inputSchema: { type: "object" } });
    const listed: Record<string, ReturnType<typeof tool>[]> = { a: [tool("b__c")], a__b: [tool("c")] };
    const pool = {
      config: (name: string) => McpServerSchema.parse({ name, command: "x" }),
      listing: async (server: string) => ({ tools: listed[server] ?? [], dropped: null }),
    } as unknown as McpPool;
    const { tools, failures } = await resolveTools(["a.*", "a__b.*"], pool, never);
    expect(tools.map((t) => t.display)).toEqual(["a.b__c"]);
    expect(failures).toEqual([
      { server: "a__b", message: expect.stringContaining("'a__b__c'"), partial: true },
    ]);
  });
});
