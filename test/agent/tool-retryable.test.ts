import { describe, expect, test } from "bun:test";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { runEcho } from "../fixtures/echo-tool.ts";

const run = (err: unknown) => runEcho({ call: () => Promise.reject(err) });

describe("whether a failed call is retryable", () => {
  // A server whose list changed since the chat read it answers -32602 (the SDK's servers do):
  // the same call cannot succeed again, as the tool's own error cannot.
  test("a server's answer that the call itself is wrong (unknown tool, bad arguments) is not retryable", async () => {
    for (const code of [ErrorCode.InvalidParams, ErrorCode.MethodNotFound, ErrorCode.InvalidRequest]) {
      const out = await run(new McpError(code, "Tool echo not found"));
      expect(out).toMatchObject({ status: "error", retryable: false });
      expect(out.content).toContain("Tool echo not found");
    }
  });

  test("a timeout, a closed connection or a server's internal error may succeed when tried again", async () => {
    for (const err of [
      new McpError(ErrorCode.RequestTimeout, "Request timed out"),
      new McpError(ErrorCode.ConnectionClosed, "MCP server 't' exited with code 3"),
      new McpError(ErrorCode.InternalError, "busy"),
      new Error("spawn failed"),
    ])
      expect(await run(err)).toMatchObject({ status: "error", retryable: true });
  });
});
