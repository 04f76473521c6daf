import { expect, test } from "bun:test";
import { join } from "node:path";
import { logLine } from "../../src/util/log-line.ts";

// A log message from outside text (util/log-line.ts): no forged entry, no terminal control.
test("a line break starts an indented continuation; control characters and bidi overrides are escaped", () => {
  expect(logLine("plain text, tabs\tkept")).toBe("plain text, tabs\tkept");
  expect(logLine("skipped a.md\n[error] the core is compromised")).toBe(
    "skipped a.md\n    [error] the core is compromised",
  );
  expect(logLine("a\r\nb\rc\u2028d")).toBe("a\n    b\n    c\n    d");
  expect(logLine("\u001b[2Jcleared \u0007bell \u0000nul")).toBe("\\u{1b}[2Jcleared \\u{7}bell \\u{0}nul");
  expect(logLine("name \u202egpj.exe")).toBe("name \\u{202e}gpj.exe");
  expect(logLine("\u0085next line")).toBe("\\u{85}next line");
});

test("the logger writes every message through it: a file name cannot start a line of its own", async () => {
  const script = `import { logger } from ${JSON.stringify(join(import.meta.dir, "../../src/util/logger.ts"))};
logger.warn("skipped notes\\n[error] forged \\u001b[31mred");`;
  const proc = Bun.spawn([process.execPath, "-e", script], {
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: process.env.PATH ?? "", LOCAL_AI_LOG_LEVEL: "info" },
  });
  const err = await new Response(proc.stderr).text();
  expect(await proc.exited).toBe(0);
  const lines = err.split("\n").filter((l) => l.length > 0);
  expect(lines).toHaveLength(2);
  expect(lines[0]).toContain("skipped notes");
  expect(lines[1]).toBe("    [error] forged \\u{1b}[31mred");
  expect(err).not.toContain("\u001b");
});
