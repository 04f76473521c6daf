import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { startServer } from "../../src/agent/mcp/connect.ts";
import { MAX_DEBUG_LINE_CHARS, StderrDebugLog, StderrTail } from "../../src/agent/mcp/stderr-tail.ts";
import { McpServerSchema } from "../../src/config/schema.ts";
import { logger } from "../../src/util/logger.ts";

// What an MCP server writes to stderr goes to the debug log (docs/agent.md "MCP servers"): a
// debug log is what a host developer pastes into an issue, so the server's configured secrets
// are redacted there as in the start's error.

const KEY = "sk-live-0123456789abcdef";

let restore: (() => void) | undefined;
afterEach(() => restore?.());

function debugLines(): string[] {
  const lines: string[] = [];
  const debug = spyOn(logger, "debug").mockImplementation((line: string) => void lines.push(line));
  restore = () => debug.mockRestore();
  return lines;
}

async function startFailing(script: string, env: Record<string, string>, args: string[] = []) {
  const cfg = McpServerSchema.parse({
    name: "s",
    command: process.execPath,
    args: ["-e", script, ...args],
    env,
  });
  const outcome = await startServer(cfg, { signal: new AbortController().signal, onClose: () => {} });
  expect(outcome.ok).toBe(false);
  if (!outcome.ok) await outcome.stopped;
}

describe("an MCP server's stderr in the debug log", () => {
  test("its env's secret echoed on stderr is redacted in the log", async () => {
    const lines = debugLines();
    await startFailing(
      "process.stderr.write('auth with ' + process.env.API_KEY + ' failed\\n'); process.exit(2)",
      {
        API_KEY: KEY,
      },
    );
    const logged = lines.filter((l) => l.startsWith("[mcp s]")).join("\n");
    expect(logged).toContain("auth with [redacted] failed");
    expect(logged).not.toContain(KEY);
  }, 30_000);

  test("a secret the server writes in two pieces is redacted whole", async () => {
    const lines = debugLines();
    const script = [
      "const k = process.env.API_KEY;",
      "process.stderr.write('token ' + k.slice(0, 10), () =>",
      "  setTimeout(() => process.stderr.write(k.slice(10) + ' refused\\n', () => process.exit(2)), 100));",
    ].join("");
    await startFailing(script, { API_KEY: KEY });
    const logged = lines.filter((l) => l.startsWith("[mcp s]")).join("\n");
    expect(logged).toContain("token [redacted] refused");
    expect(logged).not.toContain(KEY.slice(0, 10));
    expect(logged).not.toContain(KEY.slice(10));
  }, 30_000);

  test("a credential in its args echoed by its argument parser is redacted in the log", async () => {
    const lines = debugLines();
    await startFailing(
      "process.stderr.write('usage: ' + process.argv.slice(-2).join(' ') + '\\n'); process.exit(2)",
      {},
      ["--api-key", KEY],
    );
    const logged = lines.filter((l) => l.startsWith("[mcp s]")).join("\n");
    expect(logged).toContain("usage: ");
    expect(logged).toContain("[redacted]");
    expect(logged).not.toContain(KEY);
  }, 30_000);

  test("an unended line past the bound is logged without splitting a secret at its cut", () => {
    const lines: string[] = [];
    const log = new StderrDebugLog((l) => lines.push(l), { API_KEY: KEY });
    // The key straddles the bound: the part logged must not end in its start.
    log.add("x".repeat(MAX_DEBUG_LINE_CHARS - 5) + KEY.slice(0, 12));
    log.add(`${KEY.slice(12)} and on\n`);
    log.end();
    const logged = lines.join("");
    expect(logged).toContain("[redacted] and on");
    expect(logged).not.toContain(KEY.slice(0, 8));
  });

  test("a secret longer than the bound, cut in its middle, is not logged in part", () => {
    // A certificate chain or a token file's contents in env: longer than MAX_DEBUG_LINE_CHARS.
    const big = Array.from(
      { length: MAX_DEBUG_LINE_CHARS + 2000 },
      (_, i) => "0123456789abcdef"[(i * 7) % 16],
    ).join("");
    const lines: string[] = [];
    const log = new StderrDebugLog((l) => lines.push(l), { CERT: big });
    log.add(`loading ${big.slice(0, MAX_DEBUG_LINE_CHARS + 100)}`);
    log.add(`${big.slice(MAX_DEBUG_LINE_CHARS + 100)} failed\n`);
    log.end();
    const logged = lines.join("\n");
    expect(logged).toContain("loading [redacted] failed");
    expect(logged).not.toContain(big.slice(0, 100));
    expect(logged).not.toContain(big.slice(-100));
  });

  test("a secret configured with a line end after it is redacted as the server uses it, trimmed", () => {
    // A key read from a file into the config keeps the file's last newline; the server strips it.
    const lines: string[] = [];
    const env = { API_KEY: `${KEY}\n` };
    const log = new StderrDebugLog((l) => lines.push(l), env);
    log.add(`auth with ${KEY} failed\n`);
    log.end();
    const tail = new StderrTail(env);
    tail.add(`auth with ${KEY} failed\n`);
    expect(lines.join("\n")).toContain("auth with [redacted] failed");
    expect(tail.lines().join("\n")).toContain("auth with [redacted] failed");
  });

  test("a multi-line secret (a PEM key in env) written a line at a time shows none of its lines", () => {
    const body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1G"];
    const pem = ["-----BEGIN PRIVATE KEY-----", ...body, "-----END PRIVATE KEY-----", ""].join("\n");
    const lines: string[] = [];
    const log = new StderrDebugLog((l) => lines.push(l), { TLS_KEY: pem });
    // As a server logs what it loaded: the key's own lines end each write.
    const written = `loaded key ${pem}`.split(/(?<=\n)/);
    for (const chunk of written) log.add(chunk);
    log.add("listening on 8080\n");
    log.end();
    const logged = lines.join("\n");
    for (const line of body) expect(logged).not.toContain(line.slice(0, 16));
    expect(logged).toContain("listening on 8080");
    // A line of its own that is too short to be anything's secret stays.
    const short = new StderrDebugLog((l) => lines.push(l), { NOTE: "a\nb\nok" });
    short.add("a\nok\n");
    short.end();
    expect(lines.at(-1)).toBe("a\nok");
  });
});
