import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { configSecrets, KEEP_CHARS, StderrTail, withoutSecrets } from "../../src/agent/mcp/stderr-tail.ts";
import { McpServerSchema } from "../../src/config/schema.ts";
import { argSecrets } from "../../src/util/arg-secrets.ts";
import { hostileServer } from "../fixtures/mcp-hostile.ts";
import { alive } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { ChatHarness, MCP_SERVER } from "./harness.ts";

const pidsIn = (file: string) =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map(Number) : [];

type Result = { response: string; warnings: { code: string; message: string }[] };

/**
 * The warning a chat gets from a server that echoes its argv (`args` after its script) as an
 * argument parser's usage error does, and exits.
 */
async function argvEchoWarning(args: string[]): Promise<string> {
  const script =
    "process.stderr.write('usage error: ' + process.argv.slice(1).join(' ') + '\\n'); process.exit(2);";
  await using h = new ChatHarness({
    mcp_servers: [{ name: "t", command: process.execPath, args: ["-e", script, ...args] }],
  });
  h.llama.script({ content: ["fine"] });
  const { terminal } = await h.chat("c", { input: "hi" });
  return (terminal.result as Result).warnings[0]?.message ?? "";
}

describe("chat: MCP servers that will not start", () => {
  test("a server that never answers initialize is killed after startup_timeout_s; the turn runs with the other server's tools", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "hang.pids");
    await using h2 = new ChatHarness({
      agents: [{ name: "a", tools: ["hang.*", "good.echo"] }],
      mcp_servers: [
        {
          name: "hang",
          command: process.execPath,
          args: [MCP_SERVER],
          env: { MCP_TEST_MODE: "hang-init", MCP_TEST_PIDS: pids },
          // Room for the child's own start (a Bun runtime) to note its pid on a loaded machine:
          // at 1 s it was killed before it wrote it, once, beside a full suite and two helpers.
          startup_timeout_s: 3,
        },
        { name: "good", command: process.execPath, args: [MCP_SERVER] },
      ],
    });
    h2.llama.script({ content: ["no tools needed"] });
    const started = Date.now();
    const { terminal } = await h2.chat("c", { input: "hi" });
    expect(Date.now() - started).toBeLessThan(10_000);
    const result = terminal.result as Result;
    expect(result.response).toBe("no tools needed");
    expect(result.warnings.map((w) => w.code)).toEqual(["tools_unavailable"]);
    expect(result.warnings[0]?.message).toContain("'hang'");
    expect(result.warnings[0]?.message).toContain("startup_timeout_s");
    const tools = (h2.llama.requests[0]?.body.tools ?? []) as { function: { name: string } }[];
    expect(tools.map((t) => t.function.name)).toEqual(["good__echo"]);
    // The hung child ignores SIGTERM; it is gone all the same.
    const [pid] = pidsIn(pids);
    expect(pid).toBeGreaterThan(0);
    expect(await waitFor(() => !alive(pid as number))).toBe(true);
  }, 30_000);

  // A server printing its answers over several lines (or logging on stdout alone) was told only
  // as a start-up timeout: nothing said that what it wrote was not one JSON-RPC message a line.
  test("a start that times out on stdout lines that are no JSON-RPC message quotes the first, redacted and escaped", async () => {
    using scratch = tmpdir();
    const cfg = hostileServer("multiline", join(scratch.path, "pids"), 30);
    const key = "sk-live-0123456789";
    // It writes `Server ready <ESC>[32mOK<ESC>[0m, key <API_KEY>` first.
    const env = { ...cfg.env, API_KEY: key };
    const pool = new McpPool([{ ...cfg, startup_timeout_s: 1, env }], Date.now);
    try {
      const err = await pool.tools("h", new AbortController().signal).catch((e: unknown) => e);
      const message = (err as Error).message;
      expect(message).toContain("did not start within startup_timeout_s (1 s)");
      expect(message).toMatch(/; \d+ of the lines on its stdout were no JSON-RPC message/);
      expect(message).toContain(JSON.stringify("Server ready \u001b[32mOK\u001b[0m, key [redacted]"));
      expect(message).not.toContain(key);
      expect(message).not.toContain("\u001b");
    } finally {
      await pool.close();
    }
  }, 30_000);

  // console.log where console.error was meant: its reason went to stdout, and the start said
  // only "it exited with code 1 (it wrote nothing to stderr)".
  test("a server that exits during its start having said why on stdout is quoted from there", async () => {
    const message = await startError(
      "console.log('Error: FOO_TOKEN is not set'); setTimeout(() => process.exit(1), 20);",
    );
    expect(message).toContain("it exited with code 1");
    expect(message).toContain(JSON.stringify("Error: FOO_TOKEN is not set"));
  }, 30_000);

  // JSON.stringify left a bidi override, C1 control or line separator in the quote raw: a host
  // showing the warning had its text reordered.
  test("the stray stdout line quoted in a start error has its bidi overrides and C1 controls escaped", async () => {
    const message = await startError(
      "console.log('Error: \\u202eevil\\u2066 \\u0085\\u009b\\u007f\\u2028end'); setTimeout(() => process.exit(1), 20);",
    );
    expect(message).toContain('"Error: \\u{202e}evil\\u{2066} \\u{85}\\u{9b}\\u{7f}\\u{2028}end"');
    for (const c of "\u202e\u2066\u0085\u009b\u007f\u2028") expect(message).not.toContain(c);
  }, 30_000);

  // The server's own error message (an error answer to initialize) and its stderr's end were cut
  // and made well-formed, C0 controls replaced, but bidi overrides and C1 controls left raw, as
  // the stray line's were: a host showing the warning had its text reordered or a sequence opened.
  test("a server's own start error and its stderr's end have their bidi overrides and C1 controls escaped", async () => {
    const evil = "\\u202eevil\\u2066 \\u0085\\u009b\\u2028end";
    const answered = await startError(
      `setTimeout(() => {}, 5000); process.stdin.on('data', (d) => { const m = JSON.parse(String(d).split('\\n')[0]); process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32603, message: 'no: ${evil}' } }) + '\\n'); });`,
    );
    const exited = await startError(`process.stderr.write('Error: ${evil}\\n'); process.exit(1);`);
    expect(answered).toContain("no: \\u{202e}evil\\u{2066} \\u{85}\\u{9b}\\u{2028}end");
    expect(exited).toContain("Error: \\u{202e}evil\\u{2066} \\u{85}\\u{9b}");
    for (const c of "\u202e\u2066\u0085\u009b\u2028") {
      expect(answered).not.toContain(c);
      expect(exited).not.toContain(c);
    }
  }, 30_000);

  // Escaped after the cut, each bidi override became 8 characters: the error cut to 400 was 3,200
  // in every chat's warning, each stderr line cut to 200 was 1,600. The cut counts the escapes now,
  // and never splits one.
  test("a server's own start error and its stderr's lines stay within their cut once escaped", async () => {
    const answered = await startError(
      `setTimeout(() => {}, 5000); process.stdin.on('data', (d) => { const m = JSON.parse(String(d).split('\\n')[0]); process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32603, message: '\\u202e'.repeat(1000) } }) + '\\n'); });`,
    );
    const exited = await startError(
      `process.stderr.write(('\\u202e'.repeat(300) + '\\n').repeat(5)); process.exit(1);`,
    );
    const error = answered.slice(answered.lastIndexOf(": ") + 2);
    expect(error).toMatch(/^(\\u\{202e\})+…$/);
    expect(error.length).toBeLessThanOrEqual(401);
    const lines = exited.slice(exited.indexOf("the end of its stderr: ") + 23).split(" | ");
    expect(lines).toHaveLength(5);
    for (const line of lines) {
      expect(line).toMatch(/^(\\u\{202e\})+…$/);
      expect(line.length).toBeLessThanOrEqual(201);
    }
  }, 30_000);

  // The first stray line is kept 4096 characters long, then redacted, then cut to 120: a secret
  // it quotes early that ran past the 4096th character (a long JWT, a key file's JSON) matched no
  // whole value, and its first hundred characters were shown.
  test("a long secret a server echoes on stdout as it exits is not shown in part", async () => {
    const secret = `eyJSECRETLONG${"x".repeat(5000)}`;
    const script = "console.log('bad key: ' + process.env.LONG_KEY); setTimeout(() => process.exit(1), 20);";
    const pool = new McpPool([
      McpServerSchema.parse({
        name: "t",
        command: process.execPath,
        args: ["-e", script],
        env: { LONG_KEY: secret },
      }),
    ]);
    try {
      const err = await pool.tools("t", new AbortController().signal).catch((e: unknown) => e);
      const message = (err as Error).message;
      expect(message).toContain("it exited with code 1");
      expect(message).toContain("bad key: ");
      expect(message).not.toContain("SECRETLONG");
    } finally {
      await pool.close();
    }
  }, 30_000);

  test("a server that failed to start is not retried by the next chats for a while: they warn at once", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "hang.pids");
    await using h = new ChatHarness({
      mcp_servers: [
        {
          name: "t",
          command: process.execPath,
          args: [MCP_SERVER],
          env: { MCP_TEST_MODE: "hang-init", MCP_TEST_PIDS: pids },
          startup_timeout_s: 1,
        },
      ],
    });
    h.llama.script({ content: ["first"] }, { content: ["second"] });
    const first = await h.chat("c1", { input: "hi", session_id: "r1" });
    expect((first.terminal.result as Result).warnings.map((w) => w.code)).toEqual(["tools_unavailable"]);
    const second = await h.chat("c2", { input: "hi", session_id: "r2" });
    // The first failure, told again: no second start (its pid would be written before its
    // startup_timeout_s wait ended), so no second wait, counted rather than timed.
    expect((second.terminal.result as Result).warnings[0]?.message).toContain("startup_timeout_s");
    expect(pidsIn(pids)).toHaveLength(1); // started once
    expect(await waitFor(() => !alive(pidsIn(pids)[0] as number))).toBe(true); // and killed, though it ignores SIGTERM
  }, 30_000);

  test("the pool kills a server that hangs at start-up by the pid it spawned, not via the SDK's close", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "hang.pids");
    const pool = new McpPool([
      McpServerSchema.parse({
        name: "t",
        command: process.execPath,
        args: [MCP_SERVER],
        env: { MCP_TEST_MODE: "hang-init", MCP_TEST_PIDS: pids },
        startup_timeout_s: 1,
      }),
    ]);
    await expect(pool.tools("t", new AbortController().signal)).rejects.toThrow("startup_timeout_s");
    expect(await waitFor(() => pidsIn(pids).length === 1)).toBe(true);
    expect(await waitFor(() => !alive(pidsIn(pids)[0] as number), { timeoutMs: 2000 })).toBe(true);
    await pool.close();
  }, 30_000);

  test("a missing command and a server that exits at once: warning, no hang, the chat answers", async () => {
    for (const server of [
      { name: "t", command: join(import.meta.dir, "no-such-mcp-server") },
      { name: "t", command: process.execPath, args: ["-e", "process.exit(2)"] },
    ]) {
      await using h = new ChatHarness({ mcp_servers: [server] });
      h.llama.script({ content: ["fine"] });
      const started = Date.now();
      const { terminal } = await h.chat("c", { input: "hi" });
      expect(Date.now() - started).toBeLessThan(10_000);
      const result = terminal.result as Result;
      expect(result).toMatchObject({ response: "fine", warnings: [{ code: "tools_unavailable" }] });
      expect(result.warnings[0]?.message).toContain("could not be started");
      expect(h.llama.requests[0]?.body.tools).toBeUndefined();
    }
  }, 30_000);

  test("a server that exits during its start is told by its exit and the end of its stderr", async () => {
    const script = [
      "process.stderr.write('starting up\\n');",
      "process.stderr.write('Traceback (most recent call last):\\n  File \"server.py\", line 1\\n');",
      "process.stderr.write('ModuleNotFoundError: No module named \\'mcp\\'\\x1b[0m\\n');",
      "setTimeout(() => process.exit(3), 50);",
    ].join("");
    const key = "sk-test-0123456789abcdef";
    await using h = new ChatHarness({
      mcp_servers: [
        {
          name: "t",
          command: process.execPath,
          args: ["-e", `${script}process.stderr.write('KeyError: bad key ' + process.env.API_KEY + '\\n');`],
          env: { API_KEY: key, DEBUG: "1" },
        },
      ],
    });
    h.llama.script({ content: ["fine"] });
    const { terminal } = await h.chat("c", { input: "hi" });
    const message = (terminal.result as Result).warnings[0]?.message ?? "";
    expect(message).toContain("could not be started: it exited with code 3; the end of its stderr: ");
    expect(message).toContain("ModuleNotFoundError: No module named 'mcp'\ufffd[0m");
    expect(message).toContain("starting up | Traceback");
    // A traceback echoing the server's configured env (its API key) does not hand it to the host.
    expect(message).toContain("KeyError: bad key [redacted]");
    expect(message).not.toContain(key);
  }, 30_000);

  test("credentials in the server's args that its argument parser echoes are not handed to the host", async () => {
    const key = "sk-args-0123456789abcdef";
    const password = "hunter2-secret";
    const message = await argvEchoWarning([
      "--api-key",
      key,
      "--db",
      `postgres://ann:${password}@db.local/x`,
      "--name",
      "plain-value",
    ]);
    expect(message).toContain("usage error:");
    expect(message).toContain("[redacted] --db postgres://ann:[redacted]@db.local/x");
    expect(message).not.toContain(key);
    expect(message).not.toContain(password);
    // Values of flags that do not name a credential stay: they say what went wrong.
    expect(message).toContain("--name plain-value");
  }, 30_000);

  test("a flag and its key written as one argument, which the server's parser echoes, is not handed to the host", async () => {
    // `args: ["--api-key sk-…"]` (one entry, as in a shell line): argparse's "unrecognized
    // arguments: --api-key sk-…" quoted it into every chat's warning.
    const key = "sk-joined-0123456789abcdef";
    const message = await argvEchoWarning(["serve", `--api-key ${key}`, "--name plain-value"]);
    expect(message).toContain("usage error:");
    expect(message).toContain("--name plain-value");
    expect(message).not.toContain(key);
  }, 30_000);

  test("a command written as a whole command line, not found, is not quoted with its key", async () => {
    // `command: "npx -y server --api-key sk-…"`: the start's error ("Executable not found in
    // $PATH: \"…\"") quotes the command, and every chat's tools_unavailable warning with it.
    const key = "sk-cmd-0123456789abcdef";
    await using h = new ChatHarness({
      mcp_servers: [{ name: "t", command: `no-such-server-xyz -y server --api-key ${key}` }],
    });
    h.llama.script({ content: ["fine"] });
    const { terminal } = await h.chat("c", { input: "hi" });
    const message = (terminal.result as Result).warnings[0]?.message ?? "";
    expect(message).toContain("could not be started");
    expect(message).toContain("no-such-server-xyz");
    expect(message).not.toContain(key);
  }, 30_000);

  test("a server's own error at start-up that quotes its key (env or args) is not handed to the host with it", async () => {
    // Lists its tools with an error naming its upstream as it was given (args, env): a client
    // library's "request to <url> failed" does so.
    const script = [
      "let b = '';",
      "process.stdin.on('data', (d) => {",
      "  b += d;",
      "  for (let i = b.indexOf('\\n'); i >= 0; i = b.indexOf('\\n')) {",
      "    const m = JSON.parse(b.slice(0, i)); b = b.slice(i + 1);",
      "    if (m.id === undefined) continue;",
      "    const info = { protocolVersion: m.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'u', version: '1' } };",
      "    if (m.method === 'initialize') { process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: info }) + '\\n'); continue; }",
      "    const message = 'upstream refused ' + process.argv.slice(1).join(' ') + ' with ' + process.env.UPSTREAM_KEY;",
      "    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32603, message } }) + '\\n');",
      "  }",
      "});",
    ].join("\n");
    const key = "sk-env-0123456789abcdef";
    const password = "hunter2-secret";
    await using h = new ChatHarness({
      mcp_servers: [
        {
          name: "t",
          command: process.execPath,
          args: ["-e", script, "--url", `https://ann:${password}@api.local/v1`],
          env: { UPSTREAM_KEY: key },
        },
      ],
    });
    h.llama.script({ content: ["fine"] });
    const { terminal } = await h.chat("c", { input: "hi" });
    const message = (terminal.result as Result).warnings[0]?.message ?? "";
    expect(message).toContain("upstream refused");
    expect(message).not.toContain(key);
    expect(message).not.toContain(password);
  }, 30_000);

  test("argSecrets finds a secret-named flag's value, spelt apart or with =, NAME=value pairs and URL credentials", () => {
    expect(
      argSecrets([
        "--token",
        "tok-1",
        "--client-secret=cs-2",
        "API_KEY=ak-3",
        "https://u:pw-4@host/p?access_token=at-5&page=2",
        "--verbose",
        "--path",
        "/tmp/x",
        "--auth",
        "--next",
      ]),
    ).toEqual(expect.arrayContaining(["tok-1", "cs-2", "ak-3", "pw-4", "at-5"]));
    const found = argSecrets(["--path", "/tmp/x", "--auth", "--next", "https://host/p?page=2"]);
    expect(found.filter((v) => v !== "")).toEqual([]);
  });

  test("a URL in the args whose password holds a bare % (no escape) still starts the server, the password redacted", async () => {
    // decodeURIComponent throws on `%of`: the start threw after its spawn, the child left running.
    expect(() => argSecrets(["postgres://ann:50%off-pw@db.local/x", "https://100%u:pw@h/"])).not.toThrow();
    expect(argSecrets(["postgres://ann:50%off-pw@db.local/x"])).toContain("50%off-pw");
    const message = await argvEchoWarning(["--db", "postgres://ann:50%off-pw@db.local/x"]);
    expect(message).toContain("usage error:");
    expect(message).not.toContain("50%off-pw");
  }, 30_000);

  test("argSecrets finds a credential in a header-shaped argument (mcp-remote's --header)", () => {
    const found = argSecrets([
      "mcp-remote",
      "https://mcp.example/sse",
      "--header",
      "Authorization: Bearer sk-hdr-0123456789",
      "--header=X-Api-Key:xk-0123456789",
    ]);
    expect(found).toEqual(expect.arrayContaining(["sk-hdr-0123456789", "xk-0123456789"]));
    const tail = new StderrTail({}, ["--header", "Authorization: Bearer sk-hdr-0123456789"]);
    tail.add("Error: bad header Authorization: Bearer sk-hdr-0123456789\n");
    expect(tail.lines().join("\n")).not.toContain("sk-hdr");
    // A header of another name is no credential: it says what went wrong.
    expect(argSecrets(["--header", "Accept: text/event-stream"]).filter((v) => v !== "")).toEqual([]);
  });

  test("a secret the kept end of stderr begins inside is not shown in part", () => {
    const key = "sk-test-0123456789abcdef";
    const tail = new StderrTail({ API_KEY: key });
    // The tail keeps the stream's last characters: here the cut falls 12 characters into the key.
    const rest = ` z\nTraceback\nKeyError\n`;
    tail.add(`env: ${key}${rest}`);
    tail.add("y".repeat(KEEP_CHARS - rest.length - 12));
    const shown = tail.lines().join(" | ");
    expect(shown).toContain("Traceback");
    expect(shown).not.toContain(key.slice(12));
  });

  test("a key sent in a Basic Authorization header (base64 of user:key) is not quoted there either", () => {
    // An error that dumps its request (axios's does) shows the header Jira's API token goes in.
    const key = "ATATT3xFfGF0-api-token-42";
    // Three user names: the key's bytes begin at each offset of base64's 3-byte groups.
    for (const user of ["me@example.com", "ann", "bo"]) {
      const header = btoa(`${user}:${key}`);
      const shown = withoutSecrets(
        `401; headers: {"Authorization":"Basic ${header}"}`,
        configSecrets({ T: key }),
      );
      expect(shown).toContain("[redacted]");
      // What is left of the header is the user's part and a group or two at the key's ends.
      const left = shown.slice(shown.indexOf("Basic ") + 6, shown.lastIndexOf('"')).replace("[redacted]", "");
      expect(left.length).toBeLessThanOrEqual(btoa(`${user}:`).length + 8);
    }
  });

  test("a cancel while a server hangs at start-up ends the chat at once; shutdown kills the server", async () => {
    using scratch = tmpdir();
    const pids = join(scratch.path, "hang.pids");
    const h = new ChatHarness({
      mcp_servers: [
        {
          name: "t",
          command: process.execPath,
          args: [MCP_SERVER],
          env: { MCP_TEST_MODE: "hang-init", MCP_TEST_PIDS: pids },
          startup_timeout_s: 60,
        },
      ],
    });
    try {
      h.send("c", "chat", { input: "hi" });
      expect(await waitFor(() => pidsIn(pids).length === 1)).toBe(true);
      const cancelledAt = Date.now();
      h.send("k", "cancel", {});
      expect((await h.terminal("k")).result).toEqual({ cancelled: true });
      expect(await h.terminal("c")).toMatchObject({ type: "error", code: "cancelled" });
      expect(Date.now() - cancelledAt).toBeLessThan(5000);
      expect(alive(pidsIn(pids)[0] as number)).toBe(true);
    } finally {
      await h[Symbol.asyncDispose]();
    }
    expect(await waitFor(() => !alive(pidsIn(pids)[0] as number))).toBe(true);
  }, 30_000);
});

describe("chat: MCP tools that misbehave", () => {
  test("a call that outlasts timeout_s is a retryable error and the turn goes on", async () => {
    await using h = new ChatHarness({
      mcp_servers: [{ name: "t", command: process.execPath, args: [MCP_SERVER], timeout_s: 1 }],
    });
    h.llama.script(
      { tool_calls: [{ name: "t__slow", arguments: { ms: 30_000 } }] },
      { content: ["gave up on it"] },
    );
    const started = Date.now();
    const { terminal, events } = await h.chat("c", { input: "slow" });
    expect(Date.now() - started).toBeLessThan(10_000);
    const done = events.find((e) => e.event === "tool_done");
    expect(done).toMatchObject({ tool: "t.slow", status: "error", retryable: true });
    expect(String(done?.preview)).toMatch(/time/i);
    expect(terminal.result).toMatchObject({ response: "gave up on it" });
    expect(h.llama.requests[1]?.body.messages.at(-1)).toMatchObject({ role: "tool" });
  }, 30_000);

  /** A chat whose tool fails quoting `key`, its server's env value, as an upstream's 401 does. */
  async function failQuoting(key: string) {
    await using h = new ChatHarness({
      mcp_servers: [
        { name: "t", command: process.execPath, args: [MCP_SERVER], env: { MCP_TEST_UPSTREAM_KEY: key } },
      ],
    });
    h.llama.script({ tool_calls: [{ name: "t__fail", arguments: {} }] }, { content: ["it failed"] });
    const { events } = await h.chat("c", { input: "search", session_id: "s" });
    const sent = JSON.stringify(h.llama.requests[1]?.body.messages);
    return { events, sent, history: JSON.stringify(h.history("s")) };
  }

  test("a tool's error quoting its server's key (its env) reaches neither the host, the model nor the history", async () => {
    const key = "sk-upstream-0123456789abcdef";
    const { events, sent, history } = await failQuoting(key);
    const done = events.find((e) => e.event === "tool_done");
    expect(done).toMatchObject({ tool: "t.fail", status: "error" });
    expect(String(done?.preview)).toContain("401 Unauthorized");
    expect(JSON.stringify(events)).not.toContain(key);
    expect(sent).toContain("api_key=[redacted]");
    expect(sent).not.toContain(key);
    expect(history).not.toContain(key);
  }, 30_000);

  test("a tool's error quoting its server's key URL-encoded (a key with / + =) reaches no one", async () => {
    // An AWS-style secret: a client library writes it into a URL as AbCd%2FeFgH%2BiJkLmN0pQ%3D.
    const key = "AbCd/eFgH+iJkLmN0pQ=";
    const { events, sent, history } = await failQuoting(key);
    expect(JSON.stringify(events)).toContain("api_key=[redacted]");
    for (const text of [JSON.stringify(events), sent, history]) expect(text).not.toContain("AbCd");
  }, 30_000);

  test("5 MB of tool output is cut for the model and the history; the preview stays short", async () => {
    await using h = new ChatHarness();
    h.llama.script(
      { tool_calls: [{ name: "t__huge", arguments: { chars: 5_000_000 } }] },
      { content: ["big"] },
    );
    const { terminal, events } = await h.chat("c", { input: "huge", session_id: "big" });
    expect(terminal.result).toMatchObject({ response: "big" });
    const done = events.find((e) => e.event === "tool_done");
    expect(done).toMatchObject({ status: "ok" });
    expect(String(done?.preview).length).toBeLessThanOrEqual(200);
    const toolMsg = h.llama.requests[1]?.body.messages.find((m) => m.role === "tool");
    expect(String(toolMsg?.content).length).toBeLessThan(17_000);
    expect(toolMsg?.content).toContain("truncated: 4984000 more characters");
    expect(JSON.stringify(h.history("big")).length).toBeLessThan(20_000);
  }, 30_000);
});

test("a server's own error at start-up reaches the warning bounded and well-formed", async () => {
  using scratch = tmpdir();
  await using h = new ChatHarness({
    agents: [{ name: "a", tools: ["h.*"] }],
    mcp_servers: [hostileServer("list-error", join(scratch.path, "pids"), 20)],
  });
  h.llama.script({ content: ["first"] }, { content: ["second"] });
  for (const id of ["c1", "c2"]) {
    const { terminal } = await h.chat(id, { input: "hi", session_id: id });
    const [warning, ...rest] = (terminal.result as Result).warnings;
    expect(rest).toEqual([]);
    expect(warning?.code).toBe("tools_unavailable");
    expect(warning?.message).toContain("'h'");
    expect(warning?.message).toContain("www");
    // 4 MB in every chat's result for the 30 s the failure is kept, and a lone surrogate for the host.
    expect(warning?.message.length).toBeLessThan(1000);
    expect(warning?.message.isWellFormed()).toBe(true);
  }
}, 30_000);

/** The message a start of `node -e script` as an MCP server fails with. */
async function startError(script: string): Promise<string> {
  const pool = new McpPool([
    McpServerSchema.parse({ name: "t", command: process.execPath, args: ["-e", script] }),
  ]);
  try {
    const err = await pool.tools("t", new AbortController().signal).catch((e: unknown) => e);
    return (err as Error).message;
  } finally {
    await pool.close();
  }
}
