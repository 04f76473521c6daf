import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { ConfigSchema, McpServerSchema } from "../../src/config/schema.ts";
import { mcpChecks } from "../../src/doctor/checks.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { MCP_SERVER } from "./harness.ts";

// An MCP server's `cwd` that is not a folder: spawn fails with ENOENT naming the program it ran
// (the guard's /bin/sh), so the host read "posix_spawn '/bin/sh'" while doctor said ok.

describe("an MCP server's cwd that is not a folder", () => {
  test("the start fails naming the cwd, not the shell", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "file"), "");
    for (const cwd of [join(dir.path, "gone"), join(dir.path, "file")]) {
      const pool = new McpPool([
        McpServerSchema.parse({ name: "t", command: process.execPath, args: [MCP_SERVER], cwd }),
      ]);
      let message = "";
      try {
        await pool.tools("t", new AbortController().signal);
      } catch (err) {
        message = (err as Error).message;
      }
      await pool.close();
      expect(message).toContain(`cwd ${cwd}`);
      expect(message).not.toContain("/bin/sh");
    }
  });

  test("doctor's mcp check fails naming the cwd and the key to fix", () => {
    using dir = tmpdir();
    const cwd = join(dir.path, "work");
    const config = ConfigSchema.parse({
      mcp_servers: [{ name: "files", command: process.execPath, cwd }],
    });
    const [check] = mcpChecks(config);
    expect(check).toMatchObject({ id: "mcp:files", status: "fail" });
    expect(check!.message).toContain(cwd);
    expect(check!.fix).toContain("mcp_servers[files].cwd");
  });
});
