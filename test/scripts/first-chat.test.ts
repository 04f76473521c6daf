import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { FAKE_LLAMA_SERVER } from "../../scripts/try-chat.ts";
import { TTY_HINT } from "../../src/cli/serve-stdio.ts";
import { ensureBinary } from "../fixtures/core-process.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A newcomer's first chat: the hint serve-stdio gives a person at a terminal, the test
// stand-in as a llama-server (scripts/fake-llama-server) and `npm run try-chat`.
const ROOT = join(import.meta.dir, "../..");
const PING = '{"id":1,"method":"ping"}\n';

describe("a first chat", () => {
  test.skipIf(!Bun.which("script"))(
    "serve-stdio at a terminal says once, on stderr, that it speaks NDJSON",
    async () => {
      const bin = ensureBinary();
      // script(1) gives the core a terminal; Ctrl-D (\x04) at the start of a line is its EOF.
      const proc = Bun.spawn(
        ["script", "-qec", `${bin} serve-stdio --config /nonexistent/config.yaml`, "/dev/null"],
        {
          stdin: "pipe",
          stdout: "pipe",
          stderr: "pipe",
        },
      );
      proc.stdin.write(PING);
      await proc.stdin.flush();
      await Bun.sleep(500);
      proc.stdin.write("\x04");
      await proc.stdin.flush();
      const out = await new Response(proc.stdout).text();
      await proc.exited;
      expect(out).toContain(TTY_HINT);
      expect(out.split(TTY_HINT)).toHaveLength(2);
      expect(out).toContain('{"id":1,"type":"result","result":{"status":"ok"}}');
    },
    30_000,
  );

  test("a host's pipe gets no hint: stderr stays quiet", () => {
    const run = Bun.spawnSync([ensureBinary(), "serve-stdio", "--config", "/nonexistent/config.yaml"], {
      stdin: new TextEncoder().encode(PING),
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(run.stdout.toString()).toBe('{"id":1,"type":"result","result":{"status":"ok"}}\n');
    expect(run.stderr.toString()).not.toContain("NDJSON");
  });

  test("scripts/fake-llama-server answers --version as llama-server does", () => {
    const run = Bun.spawnSync([FAKE_LLAMA_SERVER, "--version"], { stdout: "pipe", stderr: "pipe" });
    expect(run.exitCode).toBe(0);
    expect(run.stderr.toString()).toStartWith("version: ");
  });

  test("npm run try-chat streams a reply through the core, and doctor passes on its setup", async () => {
    await using dir = tmpdir();
    ensureBinary();
    const run = Bun.spawnSync(
      [process.execPath, join(ROOT, "scripts/try-chat.ts"), "--dir", dir.path, "Hi", "there"],
      {
        stdout: "pipe",
        stderr: "pipe",
        timeout: 60_000,
      },
    );
    expect(run.stderr.toString()).toContain("By hand: ./dist/local-ai serve-stdio --config");
    expect(run.exitCode).toBe(0);
    expect(run.stdout.toString()).toBe("> Hi there\nYou said: Hi there\n");
    const config = readFileSync(join(dir.path, "config.yaml"), "utf8");
    expect(config).toContain(JSON.stringify(FAKE_LLAMA_SERVER));

    const doctor = Bun.spawnSync(
      [ensureBinary(), "doctor", "--json", "--config", join(dir.path, "config.yaml")],
      {
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const checks = JSON.parse(doctor.stdout.toString()).checks as { id: string; status: string }[];
    expect(checks.filter((c) => ["config", "binary", "model"].includes(c.id)).map((c) => c.status)).toEqual([
      "ok",
      "ok",
      "ok",
    ]);
  }, 90_000);
});
