import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { blobPath, incompletePath, snapshotPath } from "../../src/models/hf-cache.ts";
import { ensureBinary, spawnCore } from "../fixtures/core-process.ts";
import { type HubStandIn, startHubStandIn } from "../fixtures/hub-stand-in.ts";
import { writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// `local-ai pull` and the pull method from the compiled binary, against the hub stand-in on
// 127.0.0.1 (HF_ENDPOINT): progress, a resume after a cut, cancel, a pull beside a chat.

const onPosix = process.platform !== "win32";
const MB = 1024 * 1024;
const work = tmpdir("local-ai-e2e-pull-");
const tiny = new Uint8Array(readFileSync(writeFakeModel(work.path, "tiny.gguf")));
const big = new Uint8Array(3 * MB).map((_, i) => (i * 7) & 0xff);
const REPO = "org/tiny-GGUF";
let hub: HubStandIn;

beforeAll(async () => {
  hub = await startHubStandIn([
    {
      id: REPO,
      files: [
        { path: "tiny-Q4_K_M.gguf", content: tiny },
        { path: "big-Q8_0.gguf", content: big },
      ],
    },
    { id: "org/gated-GGUF", files: [{ path: "g-Q4_0.gguf", content: tiny }], gated: true },
    {
      id: "org/evil-GGUF",
      files: [{ path: "e-Q4_K_M.gguf", content: tiny }],
      // A hostile hub: the listing sends the file's link out of the cache.
      listing: (entries) => entries.map((e) => ({ ...e, path: `../../../../${e.path}` })),
    },
  ]);
});
afterAll(async () => {
  await hub.close();
  work[Symbol.dispose]();
});

function envFor(cache: string, extra: Record<string, string> = {}) {
  return {
    ...process.env,
    HF_ENDPOINT: hub.url,
    HF_HUB_CACHE: cache,
    LOCAL_AI_LOG_LEVEL: "info",
    NO_COLOR: "1",
    ...extra,
  } as Record<string, string>;
}

/** Runs `local-ai pull …` in an empty folder (no config: the verdict uses the defaults). */
async function cli(args: string[], cache: string, extra: Record<string, string> = {}) {
  const proc = Bun.spawn([ensureBinary(), "pull", ...args], {
    cwd: work.path,
    env: envFor(cache, extra),
    stdout: "pipe",
    stderr: "pipe",
    // A pull that blocks (a FIFO read) fails its test instead of hanging it.
    timeout: 20_000,
    killSignal: "SIGKILL",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { stdout, stderr, code };
}

const freshCache = () => join(tmpdir("local-ai-e2e-cache-").path, "hub");

describe.skipIf(!onPosix)("pull from the compiled binary", () => {
  test("plain progress lines, then the path, sha256 and the verdict; the file lands in the cache", async () => {
    const cache = freshCache();
    hub.knobs.bytesPerSecond = 2 * MB;
    try {
      const r = await cli([`${REPO}:Q8_0`], cache);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const lines = r.stdout.split("\n");
      expect(lines.filter((l) => /^big-Q8_0\.gguf {2}\d+\.\d%/.test(l)).length).toBeGreaterThanOrEqual(2);
      expect(r.stdout).not.toContain("\r");
      const sha = hub.sha256Of(REPO, "big-Q8_0.gguf");
      const pointer = snapshotPath(cache, REPO, hub.commitOf(REPO), "big-Q8_0.gguf");
      expect(r.stdout).toContain(`pulled ${REPO}@main`);
      expect(r.stdout).toContain(`sha256 ${sha}`);
      // Not a genuine GGUF (random bytes): the planner gives no verdict, and says why.
      expect(r.stdout).toContain("fit: no verdict: ");
      expect(r.stdout).toContain(`use it: model.path: ${pointer}\n    or: model.path: hf:${REPO}:Q8_0\n`);
      expect(readFileSync(pointer).equals(Buffer.from(big))).toBe(true);
    } finally {
      hub.knobs.bytesPerSecond = undefined;
    }
  }, 30_000);

  test("--json prints the events as NDJSON, then the result with the plan's verdict", async () => {
    const cache = freshCache();
    const r = await cli([`${REPO}:q4_k_m`, "--json"], cache);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const last = lines.pop();
    expect(lines.length).toBeGreaterThan(0);
    for (const e of lines)
      expect(e).toMatchObject({ type: "event", event: "download_progress", file: "tiny-Q4_K_M.gguf" });
    expect(last).toMatchObject({
      type: "result",
      result: { repo: REPO, size_bytes: tiny.length, sha256: hub.sha256Of(REPO, "tiny-Q4_K_M.gguf") },
    });
    expect(last.result.fit.fits).toBe(true);
  }, 30_000);

  test("--json failures: one single-line JSON object per line, the error once, bad arguments too (issue 19 item 7)", async () => {
    const cache = freshCache();
    const lines = (stdout: string) => {
      expect(stdout.endsWith("\n")).toBe(true);
      return stdout
        .slice(0, -1)
        .split("\n")
        .map((l) => {
          expect(l.startsWith("{") && l.endsWith("}")).toBe(true);
          return JSON.parse(l);
        });
    };
    const failures: [string[], object][] = [
      // A failure of the pull itself, after the hub answered.
      [[`${REPO}:absent.gguf`], { code: "invalid_request", data: { repo: REPO, cause: "not_found" } }],
      // Errors in the arguments.
      [["not-a-repo"], { code: "invalid_request" }],
      [[`${REPO}:Q8_0`, "--revision", "../x"], { code: "invalid_request" }],
    ];
    for (const [args, error] of failures) {
      const r = await cli([...args, "--json"], cache);
      expect(r.code).toBe(1);
      const out = lines(r.stdout);
      expect(out.filter((o) => o.type === "error")).toHaveLength(1);
      const last = out.at(-1);
      // The one-line message still goes to stderr, as for every command.
      expect(r.stderr).toContain(`${last.code}: ${last.message}`);
      expect(last).toMatchObject({ type: "error", ...error });
      expect(out.every((o) => o.type === "event" || o.type === "error")).toBe(true);
    }
  }, 30_000);

  test("a cut mid-body fails naming the cause and keeps the partial; the next pull resumes it", async () => {
    const cache = freshCache();
    hub.knobs.cut = { after: MB };
    const first = await cli([`${REPO}:big-Q8_0.gguf`], cache);
    expect(first.code).toBe(1);
    expect(first.stderr).toContain(`internal_error: ${REPO}: big-Q8_0.gguf: the connection broke after`);
    expect(first.stderr).toContain("pull again to resume");
    const partial = incompletePath(cache, REPO, hub.sha256Of(REPO, "big-Q8_0.gguf"));
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThan(0);
    const second = await cli([`${REPO}:big-Q8_0.gguf`, "--json"], cache);
    expect(second.code).toBe(0);
    expect(hub.requests.filter((q) => q.server === "storage").at(-1)!.range).toBe(`bytes=${kept}-`);
    expect(existsSync(blobPath(cache, REPO, hub.sha256Of(REPO, "big-Q8_0.gguf")))).toBe(true);
  }, 30_000);

  test.each([
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const)(
    "%s cancels: exit %d as every command's, the partial kept, nothing under the final name",
    async (signal, exit) => {
      const cache = freshCache();
      hub.knobs.bytesPerSecond = MB;
      try {
        const proc = Bun.spawn([ensureBinary(), "pull", `${REPO}:Q8_0`], {
          cwd: work.path,
          env: envFor(cache),
          stdout: "pipe",
          stderr: "pipe",
        });
        const partial = incompletePath(cache, REPO, hub.sha256Of(REPO, "big-Q8_0.gguf"));
        const deadline = Date.now() + 10_000;
        while (!(existsSync(partial) && statSync(partial).size > 100_000) && Date.now() < deadline)
          await Bun.sleep(20);
        proc.kill(signal);
        const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
        expect(code).toBe(exit);
        expect(stderr).toContain("the partial download is kept");
        expect(statSync(partial).size).toBeGreaterThan(100_000);
        expect(existsSync(blobPath(cache, REPO, hub.sha256Of(REPO, "big-Q8_0.gguf")))).toBe(false);
      } finally {
        hub.knobs.bytesPerSecond = undefined;
      }
    },
    30_000,
  );

  test("a reader that leaves (`| head -1`) stops the pull: one line on stderr, no trace, the lock released", async () => {
    const cache = freshCache();
    const sha = hub.sha256Of(REPO, "big-Q8_0.gguf");
    // The download stalls after 1 MiB, so the progress lines go on (one every 2 s) after head left.
    hub.knobs.hangAfter = MB;
    try {
      const code = join(dirname(cache), "code");
      const proc = Bun.spawn(
        ["sh", "-c", `{ "$0" pull ${REPO}:Q8_0; echo $? > "$1"; } | head -1`, ensureBinary(), code],
        { cwd: work.path, env: envFor(cache), stdout: "pipe", stderr: "pipe", timeout: 30_000 },
      );
      const [stdout, stderr] = await Promise.all([
        new Response(proc.stdout).text(),
        new Response(proc.stderr).text(),
        proc.exited,
      ]);
      expect(stdout).toStartWith("big-Q8_0.gguf  ");
      expect(stderr).not.toContain("EPIPE");
      expect(stderr).not.toContain("    at ");
      expect(stderr).toContain("stdout was closed, so the pull stopped; the partial download is kept");
      expect(readFileSync(code, "utf8").trim()).toBe("1");
      expect(statSync(incompletePath(cache, REPO, sha)).size).toBeGreaterThan(0);
      expect(existsSync(`${blobPath(cache, REPO, sha)}.lock`)).toBe(false);
    } finally {
      hub.knobs.hangAfter = undefined;
    }
  }, 40_000);

  test("a killed pull leaves its partial and its lock; the next pull takes the lock over and resumes", async () => {
    const cache = freshCache();
    hub.knobs.bytesPerSecond = MB;
    const sha = hub.sha256Of(REPO, "big-Q8_0.gguf");
    const partial = incompletePath(cache, REPO, sha);
    try {
      const proc = Bun.spawn([ensureBinary(), "pull", `${REPO}:Q8_0`], {
        cwd: work.path,
        env: envFor(cache),
      });
      const deadline = Date.now() + 10_000;
      while (!(existsSync(partial) && statSync(partial).size > 100_000) && Date.now() < deadline)
        await Bun.sleep(20);
      proc.kill("SIGKILL");
      await proc.exited;
    } finally {
      hub.knobs.bytesPerSecond = undefined;
    }
    expect(existsSync(`${blobPath(cache, REPO, sha)}.lock`)).toBe(true);
    const kept = statSync(partial).size;
    const again = await cli([`${REPO}:Q8_0`, "--json"], cache);
    expect(again.code).toBe(0);
    expect(hub.requests.filter((q) => q.server === "storage").at(-1)!.range).toBe(`bytes=${kept}-`);
    expect(existsSync(`${blobPath(cache, REPO, sha)}.lock`)).toBe(false);
  }, 30_000);

  test("a lock left before a reboot, its pid now another live process: taken over at once (issue 19 item 6)", async () => {
    const cache = freshCache();
    const sha = hub.sha256Of(REPO, "tiny-Q4_K_M.gguf");
    const lock = `${blobPath(cache, REPO, sha)}.lock`;
    mkdirSync(dirname(lock), { recursive: true });
    const other = Bun.spawn(["sleep", "30"]);
    try {
      writeFileSync(lock, JSON.stringify({ pid: other.pid, id: "before", started: 0, proc_start: "1" }));
      const t0 = Date.now();
      const r = await cli([`${REPO}:Q4_K_M`, "--json"], cache);
      expect(r.code).toBe(0);
      expect(Date.now() - t0).toBeLessThan(10_000);
      expect(r.stdout).not.toContain('"phase":"wait"');
      expect(existsSync(lock)).toBe(false);
    } finally {
      other.kill("SIGKILL");
    }
  }, 30_000);

  test("on a terminal the progress is a bar redrawn in place", async () => {
    const script = Bun.which("script");
    if (!script) return;
    const cache = freshCache();
    hub.knobs.bytesPerSecond = 2 * MB;
    try {
      // util-linux script(1) gives the command a pseudo-terminal; its output is the terminal's.
      const cmd = `${ensureBinary()} pull ${REPO}:Q8_0`;
      const proc = Bun.spawn([script, "-qec", cmd, "/dev/null"], {
        cwd: work.path,
        env: envFor(cache),
        stdout: "pipe",
      });
      const out = await new Response(proc.stdout).text();
      expect(await proc.exited).toBe(0);
      expect(out).toMatch(/\rbig-Q8_0\.gguf \[#*-*\]/);
      expect(out).toContain("pulled org/tiny-GGUF@main");
    } finally {
      hub.knobs.bytesPerSecond = undefined;
    }
  }, 30_000);

  test("a gated repo: refused without access, opened by HF_TOKEN, which never shows in the output", async () => {
    const cache = freshCache();
    const token = "hf_e2e_secret_token_value";
    const debug = { HF_TOKEN: token, LOCAL_AI_LOG_LEVEL: "trace" };
    const refused = await cli(["org/gated-GGUF:Q4_0"], cache, debug);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("the repo is gated");
    hub.tokens.add(token);
    const opened = await cli(["org/gated-GGUF:Q4_0", "--json"], cache, debug);
    expect(opened.code).toBe(0);
    for (const text of [refused.stdout, refused.stderr, opened.stdout, opened.stderr])
      expect(text).not.toContain(token);
  }, 30_000);

  test("a FIFO as the token file, the blob or the partial: the pull answers with the cause, it never hangs (issue 19 item 4)", async () => {
    const cache = freshCache();
    const sha = hub.sha256Of(REPO, "tiny-Q4_K_M.gguf");
    const fifo = (path: string) => {
      mkdirSync(dirname(path), { recursive: true });
      expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0);
      return path;
    };
    const tokenFile = fifo(join(dirname(cache), "token"));
    const viaToken = await cli([`${REPO}:Q4_K_M`], cache, { HF_TOKEN_PATH: tokenFile, HF_TOKEN: "" });
    expect(viaToken.code).toBe(1);
    expect(viaToken.stderr).toContain("invalid_request: ");
    expect(viaToken.stderr).toContain(`the token file ${tokenFile} is not a regular file (a FIFO)`);

    for (const path of [blobPath(cache, REPO, sha), incompletePath(cache, REPO, sha)]) {
      fifo(path);
      const r = await cli([`${REPO}:Q4_K_M`], cache);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${path} is not a regular file (a FIFO); remove it and pull again`);
      rmSync(path);
    }
    expect((await cli([`${REPO}:Q4_K_M`], cache)).code).toBe(0);
  }, 60_000);

  test("a listing whose path leaves the cache is refused naming the repo and the entry (issue 19 item 5)", async () => {
    const cache = freshCache();
    const r = await cli(["org/evil-GGUF:Q4_K_M", "--json"], cache);
    expect(r.code).toBe(1);
    expect(JSON.parse(r.stdout)).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { repo: "org/evil-GGUF", cause: "bad_listing", entry: "../../../../e-Q4_K_M.gguf" },
    });
    expect(r.stderr).toContain(`org/evil-GGUF: the hub's file listing names "../../../../e-Q4_K_M.gguf"`);
    expect(existsSync(join(dirname(cache), "e-Q4_K_M.gguf"))).toBe(false);
  }, 30_000);

  test("a token with a control character: refused as malformed, never shown; a redirect loop told as one (issue 19 item 9)", async () => {
    const cache = freshCache();
    const before = hub.requests.length;
    const token = await cli([`${REPO}:Q4_K_M`, "--json"], cache, { HF_TOKEN: "hf_e2e_secret\u0007x" });
    expect(token.code).toBe(1);
    expect(JSON.parse(token.stdout)).toMatchObject({ type: "error", data: { cause: "unauthorized" } });
    expect(token.stderr).toContain("HF_TOKEN holds a control character");
    expect(token.stdout + token.stderr).not.toContain("hf_e2e_secret");
    expect(hub.requests.length).toBe(before);
    hub.knobs.redirectLoop = true;
    try {
      const loop = await cli([`${REPO}:Q4_K_M`, "--json"], cache);
      expect(loop.code).toBe(1);
      const error = JSON.parse(loop.stdout.trim().split("\n").at(-1)!);
      expect(error.message).toContain("the hub redirected more than 10 times (the last answer was HTTP 302)");
      expect(error.message).not.toContain("the hub says");
      expect(existsSync(incompletePath(cache, REPO, hub.sha256Of(REPO, "tiny-Q4_K_M.gguf")))).toBe(false);
    } finally {
      hub.knobs.redirectLoop = undefined;
    }
  }, 30_000);

  test("bad input: a malformed reference, no argument, HF_HUB_OFFLINE", async () => {
    const cache = freshCache();
    const bad = await cli(["not-a-repo"], cache);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("invalid_request");
    const none = await cli([], cache);
    expect(none.code).toBe(2);
    const before = hub.requests.length;
    const offline = await cli([`${REPO}:Q8_0`], cache, { HF_HUB_OFFLINE: "1" });
    expect(offline.code).toBe(1);
    expect(offline.stderr).toContain("HF_HUB_OFFLINE");
    expect(hub.requests.length).toBe(before);
  }, 30_000);
});

describe.skipIf(!onPosix)("the pull method from the compiled core", () => {
  test("a pull beside a chat: both finish; a second pull is cancelled by id with its partial kept", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ content: "talking while pulling", chunk_delay_ms: 40 }],
    });
    const cache = join(dir.path, "hub");
    await using core = spawnCore({
      cwd: dir.path,
      env: { ...stack.env, HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache },
    });
    // Slow enough that the pull and the chat overlap.
    hub.knobs.bytesPerSecond = Math.ceil(tiny.length / 4);
    try {
      core.send({ id: "pull", method: "pull", params: { repo: REPO, quant: "Q4_K_M" } });
      core.send({ id: "chat", method: "chat", params: { input: "hi" } });
      await core.waitFor((m) => m.some((x) => x.id === "chat" && x.type !== "event"), 20_000);
      await core.waitFor((m) => m.some((x) => x.id === "pull" && x.type !== "event"), 20_000);
      // They ran side by side: the pull was still downloading after the chat had started.
      const chatStart = core.messages.findIndex((x) => x.id === "chat");
      const pullLater = core.messages.findIndex(
        (x, i) =>
          i > chatStart && x.id === "pull" && x.event === "download_progress" && x.bytes_done < x.total,
      );
      expect(pullLater).toBeGreaterThan(chatStart);
      expect(core.terminal("chat")).toMatchObject({
        type: "result",
        result: { response: "talking while pulling" },
      });
      const pulled = core.terminal("pull")!;
      expect(pulled.type).toBe("result");
      // A genuine GGUF, planned with the config's settings: it fits.
      expect(pulled.result.fit).toMatchObject({ fits: true, context_per_slot: 2048 });
      const progress = core.messages.filter((m) => m.id === "pull" && m.event === "download_progress");
      expect(progress.length).toBeGreaterThanOrEqual(3);
      expect(progress.at(-1)).toMatchObject({
        bytes_done: tiny.length,
        total: tiny.length,
        phase: "download",
      });

      hub.knobs.bytesPerSecond = MB;
      core.send({ id: "slow", method: "pull", params: { repo: REPO, quant: "Q8_0" } });
      await core.waitFor((m) => m.some((x) => x.id === "slow" && x.event === "download_progress"), 10_000);
      await Bun.sleep(200);
      const c = await core.request({ id: "c", method: "cancel", params: { request_id: "slow" } });
      expect(c.result).toEqual({ cancelled: true });
      await core.waitFor((m) => m.some((x) => x.id === "slow" && x.type !== "event"), 10_000);
      expect(core.terminal("slow")).toMatchObject({ type: "error", code: "cancelled" });
      const partial = incompletePath(cache, REPO, hub.sha256Of(REPO, "big-Q8_0.gguf"));
      expect(statSync(partial).size).toBeGreaterThan(0);
      await core.request({ id: "bye", method: "shutdown" });
      expect(await core.exited()).toBe(0);
    } finally {
      hub.knobs.bytesPerSecond = undefined;
    }
  }, 60_000);
});
