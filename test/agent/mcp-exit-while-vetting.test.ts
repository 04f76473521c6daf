import { afterEach, expect, spyOn, test } from "bun:test";
import { startServer } from "../../src/agent/mcp/connect.ts";
import * as toolList from "../../src/agent/mcp/tool-list.ts";
import { McpServerSchema } from "../../src/config/schema.ts";

// vetTools gives the loop its turn between tools (tool-list.ts): a server that answered its tools
// and exited while they were vetted must not start as ready, its connection closed. The pool
// heard its close while it was still starting, so nothing would ever start it again.

const SERVER = [
  "let buf = '';",
  "const out = (m) => process.stdout.write(JSON.stringify(m) + '\\n');",
  "process.stdin.on('data', (d) => {",
  "  buf += d; let i;",
  "  while ((i = buf.indexOf('\\n')) >= 0) {",
  "    const m = JSON.parse(buf.slice(0, i)); buf = buf.slice(i + 1);",
  "    if (m.method === 'initialize') out({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'x', version: '1' } } });",
  "    if (m.method === 'tools/list') process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } }) + '\\n', () => process.exit(3));",
  "  }",
  "});",
].join("\n");

let restore: (() => void) | undefined;
afterEach(() => restore?.());

test("a server that exits while its tools are vetted fails its start", async () => {
  const closed = Promise.withResolvers<void>();
  const vet = toolList.vetTools;
  // The exit heard before the vetting ends, as a yield between tools lets it be: by order, no clock.
  const spy = spyOn(toolList, "vetTools").mockImplementation(async (listed) => {
    await closed.promise;
    return vet(listed);
  });
  restore = () => spy.mockRestore();
  const cfg = McpServerSchema.parse({ name: "s", command: process.execPath, args: ["-e", SERVER] });
  const outcome = await startServer(cfg, {
    signal: new AbortController().signal,
    onClose: () => closed.resolve(),
  });
  expect(spy).toHaveBeenCalled();
  expect(outcome.ok).toBe(false);
  if (!outcome.ok) {
    expect(outcome.error.message).toContain("exited");
    await outcome.stopped;
  }
}, 30_000);
