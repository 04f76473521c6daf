import { describe, expect, test } from "bun:test";
import { closeSync, constants, openSync, readSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { ensureBinary, REPO, spawnCore } from "../fixtures/core-process.ts";
import { waitUntil } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("the compiled binary", () => {
  test("--version prints the embedded version; --help exits 0; an unknown command exits 2", () => {
    const bin = ensureBinary();
    const v = Bun.spawnSync([bin, "--version"]);
    expect(v.exitCode).toBe(0);
    expect(v.stdout.toString().trim()).toBe(pkg.version);
    const help = Bun.spawnSync([bin, "--help"]);
    expect(help.exitCode).toBe(0);
    expect(help.stdout.toString()).toContain("serve-stdio");
    const bad = Bun.spawnSync([bin, "frobnicate"]);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.toString()).toContain("unknown command 'frobnicate'");
  });

  test("initialize → ping → shutdown, exit 0, and stdout carries protocol lines only", async () => {
    await using core = spawnCore();
    const init = await core.request({ id: 1, method: "initialize", params: { protocol_versions: [1] } });
    expect(init.result).toMatchObject({
      protocol_version: 1,
      server: { name: "local-ai", version: pkg.version },
    });
    expect(await core.request({ id: 2, method: "ping" })).toEqual({
      id: 2,
      type: "result",
      result: { status: "ok" },
    });
    expect((await core.request({ id: 3, method: "shutdown" })).type).toBe("result");
    expect(await core.exited()).toBe(0);
    for (const line of core.rawLines) expect(() => JSON.parse(line)).not.toThrow();
  });

  test("10k pipelined requests are each answered exactly once", async () => {
    await using core = spawnCore();
    const n = 10_000;
    let batch = "";
    for (let i = 0; i < n; i++) batch += JSON.stringify({ id: i, method: "ping" }) + "\n";
    core.write(batch);
    core.closeStdin();
    expect(await core.exited(30_000)).toBe(0);
    const seen = new Map<number, number>();
    for (const m of core.messages) seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
    expect(core.messages.length).toBe(n);
    expect(seen.size).toBe(n);
    expect([...seen.values()].every((c) => c === 1)).toBe(true);
  });

  test("CRLF, blank lines and a character split across writes are all fine", async () => {
    await using core = spawnCore();
    core.write('\r\n\n{"id":"a","method":"ping"}\r\n   \n');
    const bytes = new TextEncoder().encode('{"id":"ü😀","method":"ping"}\n');
    const cut = bytes.indexOf(0xf0) + 2;
    core.write(bytes.subarray(0, cut));
    await Bun.sleep(50);
    core.write(bytes.subarray(cut));
    await core.waitFor((ms) => ms.length >= 2);
    expect(core.messages.map((m) => m.id)).toEqual(["a", "ü😀"]);
    core.closeStdin();
    expect(await core.exited()).toBe(0);
  });

  test("bad lines get invalid_json / invalid_request / unknown_method and the loop lives on", async () => {
    await using core = spawnCore();
    core.write('{"id":1,"method":\n[]\n{"id":true,"method":"ping"}\n{"id":2}\n{"id":3,"method":"nope"}\n');
    const last = await core.request({ id: 4, method: "ping" });
    expect(last.type).toBe("result");
    expect(core.messages.slice(0, 5).map((m) => [m.id, m.code])).toEqual([
      [null, "invalid_json"],
      [null, "invalid_request"],
      [null, "invalid_request"],
      [2, "invalid_request"],
      [3, "unknown_method"],
    ]);
    core.closeStdin();
    await core.exited();
  });

  test("a line over max_line_bytes is rejected without taking the loop down", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "stdio:\n  max_line_bytes: 1024\n");
    await using core = spawnCore({ cwd: dir.path });
    await core.request({ id: "load", method: "doctor" }); // makes sure the config (and its limit) is loaded
    core.write(`{"id":"big","method":"ping","params":{"x":"${"y".repeat(50_000)}"}}\n`);
    const after = await core.request({ id: "after", method: "ping" });
    expect(after.type).toBe("result");
    const rejected = core.messages.find((m) => m.code === "invalid_request" && m.id === null);
    expect(rejected?.message).toContain("exceeds the limit of 1024 bytes");
    expect(core.messages.some((m) => m.id === "big")).toBe(false);
    core.closeStdin();
    await core.exited();
  });

  test("an unexpected failure is internal_error: no stack on stdout, the trace on stderr", async () => {
    await using core = spawnCore();
    const r = await core.request({ id: 1, method: "test.fail" });
    expect(r.code).toBe("internal_error");
    core.closeStdin();
    await core.exited();
    expect(core.rawLines.join("\n")).not.toContain("secret internal detail");
    expect(core.stderr).toContain("secret internal detail");
  });

  test("a bad config is config_invalid with file, line and key; ping still works", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "app:\n  max_steps: many\n");
    await using core = spawnCore({ cwd: dir.path });
    const r = await core.request({ id: 1, method: "plan" });
    expect(r).toMatchObject({
      code: "config_invalid",
      data: { file: join(dir.path, "config.yaml"), line: 2, key: "app.max_steps" },
    });
    expect((await core.request({ id: 2, method: "ping" })).type).toBe("result");
    core.closeStdin();
    await core.exited();
  });

  test("log level: the config's logging.level applies, LOCAL_AI_LOG_LEVEL overrides it; stderr only", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "logging:\n  level: debug\n");
    const run = async (env: Record<string, string>) => {
      await using core = spawnCore({ cwd: dir.path, env });
      await core.request({ id: 1, method: "doctor" }); // loads the config
      await core.request({ id: 2, method: "test.fail" });
      core.closeStdin();
      expect(await core.exited()).toBe(0);
      for (const line of core.rawLines) expect(() => JSON.parse(line)).not.toThrow();
      return core.stderr;
    };
    const debug = await run({ LOCAL_AI_LOG_LEVEL: "" });
    expect(debug).toContain("stopping: end of input"); // a debug line
    expect(debug).toContain("secret internal detail"); // the error trace
    const silent = await run({ LOCAL_AI_LOG_LEVEL: "silent" });
    expect(silent).toBe("");
    const errorsOnly = await run({ LOCAL_AI_LOG_LEVEL: "error" });
    expect(errorsOnly).not.toContain("stopping: end of input");
    expect(errorsOnly).toContain("secret internal detail");
  });

  for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
    test(`${signal} cancels in-flight work, drains and exits 0`, async () => {
      await using core = spawnCore();
      core.send({ id: "long", method: "test.sleep", params: { ms: 20_000 } });
      await core.request({ id: "p", method: "ping" });
      core.proc.kill(signal);
      expect(await core.exited()).toBe(0);
      expect(core.terminal("long")).toMatchObject({ type: "error", code: "cancelled" });
    });
  }

  test("stdin EOF cancels a running chat-like request and exits 0", async () => {
    await using core = spawnCore();
    core.send({ id: "long", method: "test.sleep", params: { ms: 20_000 } });
    await core.request({ id: "p", method: "ping" });
    core.closeStdin();
    expect(await core.exited()).toBe(0);
    expect(core.terminal("long")).toMatchObject({ code: "cancelled" });
  });

  test("a stalled reader: events are dropped and counted, results all arrive, nothing blocks", async () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "config.yaml"), "stdio:\n  queue_size: 64\n");
    await using core = spawnCore({ cwd: dir.path, readStdout: false, env: { LOCAL_AI_LOG_LEVEL: "debug" } });
    core.send({ id: "load", method: "doctor" });
    await Bun.sleep(200);
    // 200k events of 256 bytes (~60 MB) cannot fit in a pipe the host is not reading.
    core.send({ id: "flood", method: "test.flood", params: { count: 200_000, size: 256 } });
    for (let i = 0; i < 100; i++) core.send({ id: `p${i}`, method: "ping" });
    await Bun.sleep(1500); // the host reads nothing meanwhile
    core.startReading();
    await core.waitFor(
      () => core.terminal("flood") !== undefined && core.terminal("p99") !== undefined,
      30_000,
    );
    const flood = core.terminal("flood")!;
    expect(flood.result.emitted).toBe(200_000);
    expect(flood.result.dropped_events).toBeGreaterThan(0);
    const events = core.messages.filter((m) => m.id === "flood" && m.type === "event");
    expect(events.length + flood.result.dropped_events).toBe(200_000);
    // Delivered events keep their order.
    const ns = events.map((e) => e.n);
    expect(ns.every((n, i) => i === 0 || n > ns[i - 1]!)).toBe(true);
    for (let i = 0; i < 100; i++) expect(core.terminal(`p${i}`)?.type).toBe("result");
    core.closeStdin();
    expect(await core.exited()).toBe(0);
    expect(core.stderr).toContain("STDIO_WRITER_DROP");
  });

  test.skipIf(process.platform === "win32")(
    "a host that reads only once the core is draining at exit gets every answer, the shutdown result last",
    async () => {
      using dir = tmpdir();
      // A bound no loaded CI box reaches: the host's late start is placed by the core's log.
      writeFileSync(join(dir.path, "config.yaml"), "stdio:\n  drain_timeout_ms: 60000\n");
      // stdout a real pipe of 64 KiB (a FIFO), as a host's os.pipe(): Bun.spawn's own is a
      // socket pair that takes all of this at once, leaving nothing for the drain to wait for.
      const fifo = join(dir.path, "stdout.fifo");
      expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
      const writeEnd = openSync(fifo, constants.O_RDWR);
      const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
      const proc = Bun.spawn([ensureBinary(), "serve-stdio"], {
        cwd: dir.path,
        stdin: "pipe",
        stdout: writeEnd,
        stderr: "pipe",
        env: { ...process.env, LOCAL_AI_TEST_METHODS: "1", LOCAL_AI_LOG_LEVEL: "debug" },
      });
      let stderr = "";
      void (async () => {
        for await (const chunk of proc.stderr) stderr += Buffer.from(chunk).toString();
      })();
      try {
        // ~106 KB of answers: more than the pipe holds, fewer than would pause reading.
        const n = 2000;
        let batch = "";
        for (let i = 0; i < n; i++) batch += JSON.stringify({ id: i, method: "ping" }) + "\n";
        proc.stdin.write(batch + JSON.stringify({ id: "bye", method: "shutdown" }) + "\n");
        proc.stdin.flush();
        // Every answer is made and the core is about to exit, most of it unread. A core that
        // exited now would drop the rest: it is given the time to, which only makes this test
        // stricter (a right core waits for the host, up to 60 s).
        expect(await waitUntil(() => stderr.includes("draining output before exit"), 30_000)).toBe(true);
        await Promise.race([proc.exited, Bun.sleep(500)]);
        let text = "";
        const buf = Buffer.alloc(64 * 1024);
        const deadline = Date.now() + 30_000;
        while (!text.endsWith("\n") || !text.includes('"id":"bye"')) {
          const got = readSome(readEnd, buf);
          if (got > 0) text += buf.toString("utf8", 0, got);
          else if (proc.exitCode !== null || Date.now() > deadline) break;
          else await Bun.sleep(5);
        }
        expect(await Promise.race([proc.exited, Bun.sleep(30_000).then(() => "running")])).toBe(0);
        expect(text.endsWith("\n")).toBe(true); // not cut off by the exit
        const messages = text
          .trimEnd()
          .split("\n")
          .map((l) => JSON.parse(l));
        expect(messages.length).toBe(n + 1);
        expect(new Set(messages.map((m) => m.id)).size).toBe(n + 1);
        expect(messages.every((m) => m.type === "result")).toBe(true);
        expect(messages.at(-1).id).toBe("bye");
        expect(stderr).not.toContain("not fully drained");
      } finally {
        proc.kill("SIGKILL");
        closeSync(readEnd);
        closeSync(writeEnd);
      }
    },
    90_000,
  );

  test("a closed stdout is logged once as ERROR_STACKTRACE and requests keep being processed", async () => {
    // `true` exits at once, so the core's stdout is a pipe with no reader (EPIPE on write).
    const proc = Bun.spawn(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash expansion, not a template
      ["bash", "-c", '"$0" serve-stdio | true; exit "${PIPESTATUS[0]}"', ensureBinary()],
      {
        stdin: "pipe",
        stdout: "ignore",
        stderr: "pipe",
        cwd: REPO,
        env: { ...process.env, LOCAL_AI_TEST_METHODS: "1", LOCAL_AI_LOG_LEVEL: "info" },
      },
    );
    await Bun.sleep(200);
    for (let i = 0; i < 50; i++) proc.stdin.write(JSON.stringify({ id: i, method: "ping" }) + "\n");
    proc.stdin.write(JSON.stringify({ id: "f", method: "test.flood", params: { count: 5000 } }) + "\n");
    proc.stdin.flush();
    await Bun.sleep(300);
    proc.stdin.write(JSON.stringify({ id: "bye", method: "shutdown" }) + "\n");
    proc.stdin.flush();
    const code = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => -1)]);
    if (code === -1) proc.kill("SIGKILL");
    const stderr = await new Response(proc.stderr).text();
    expect(code).toBe(0);
    expect(stderr.match(/ERROR_STACKTRACE/g)?.length).toBe(1);
  });
});

/** Bytes read from a non-blocking fd now; 0 when none are waiting. */
function readSome(fd: number, buf: Buffer): number {
  try {
    return readSync(fd, buf);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EAGAIN") return 0;
    throw err;
  }
}
