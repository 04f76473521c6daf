import { describe, expect, test } from "bun:test";
import {
  chmodSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { PATH_LOGS_KEPT } from "../../src/runtime/log-prune.ts";
import { secretHider } from "../../src/runtime/log-redact.ts";
import { REDACTED_MARK } from "../../src/runtime/log-scrub.ts";
import { LogTail, RotatingLog, readLines } from "../../src/runtime/log-sink.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("LogTail", () => {
  test("keeps only the last lines, each bounded", () => {
    const tail = new LogTail(3, 5);
    for (const l of ["a", "b", "c", "d", "123456789"]) tail.push(l);
    expect(tail.last()).toEqual(["c", "d", "12345…"]);
    expect(tail.last(1)).toEqual(["12345…"]);
  });

  test("a long line is cut between characters and escapes, never in one (a failed start's log_tail)", () => {
    // Its lines are escaped (llama-log-text.ts): half an escape, or half an emoji, went to the
    // host, whose JSON parser may refuse a lone surrogate.
    const tail = new LogTail(3, 5);
    tail.push("abcd\u{1F600}x");
    tail.push("ab\\u{9b}cd");
    expect(tail.last()).toEqual(["abcd…", "ab…"]);
  });
});

describe("RotatingLog", () => {
  test("rotates past maxBytes and keeps `files` files in all", async () => {
    await using dir = tmpdir();
    const log = new RotatingLog(dir.path, 100, 3);
    for (let i = 0; i < 20; i++) log.write(`${String(i).padStart(2, "0")} ${"x".repeat(30)}\n`);
    log.close();
    expect(readdirSync(dir.path).sort()).toEqual([
      REDACTED_MARK,
      "llama-server.log",
      "llama-server.log.1",
      "llama-server.log.2",
    ]);
    const current = readFileSync(`${dir.path}/llama-server.log`, "utf8");
    expect(current).toContain("19 ");
    expect(current.length).toBeLessThanOrEqual(100);
  });

  test("a logs folder removed under a running core (space freed by hand) is made again", async () => {
    await using dir = tmpdir();
    const logs = join(dir.path, "logs");
    const log = new RotatingLog(logs, 1000, 2);
    log.write("before\n");
    rmSync(logs, { recursive: true });
    log.write("after the folder went\n");
    log.write("and the next line\n");
    log.close();
    expect(readFileSync(join(logs, "llama-server.log"), "utf8")).toBe(
      "after the folder went\nand the next line\n",
    );
    expect(statSync(logs).mode & 0o777).toBe(0o700);
  });
});

describe.skipIf(process.platform === "win32")("RotatingLog and links", () => {
  test("a llama-server.log planted as a link: its target is neither appended to nor chmod'ed", async () => {
    await using dir = tmpdir();
    const target = join(dir.path, "elsewhere");
    writeFileSync(target, "theirs\n");
    chmodSync(target, 0o644);
    const logs = join(dir.path, "logs");
    const log = new RotatingLog(logs, 1000, 2);
    symlinkSync(target, join(logs, "llama-server.log"));
    log.write("a prompt line\n");
    log.close();
    expect(readFileSync(target, "utf8")).toBe("theirs\n");
    expect(statSync(target).mode & 0o777).toBe(0o644);
  });
});

describe("readLines", () => {
  test("splits lines and decodes UTF-8 split across chunks", async () => {
    const bytes = new TextEncoder().encode("é one\r\ntwo\nthree");
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes.slice(0, 1));
        c.enqueue(bytes.slice(1));
        c.close();
      },
    });
    const lines: string[] = [];
    await readLines(stream, (l) => lines.push(l));
    expect(lines).toEqual(["é one", "two", "three"]);
  });

  test("a child writing without a newline is handed on in parts of the limit, not held whole", async () => {
    const reads = Array.from({ length: 50 }, () => new TextEncoder().encode("x".repeat(1000)));
    let held = 0;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        for (const r of reads) c.enqueue(r);
        c.enqueue(new TextEncoder().encode("tail\nnext"));
        c.close();
      },
    });
    const lines: string[] = [];
    await readLines(
      stream,
      (l) => {
        held = Math.max(held, l.length);
        lines.push(l);
      },
      4096,
    );
    expect(held).toBe(4096);
    expect(lines.slice(0, 12).every((l) => l === "x".repeat(4096))).toBe(true);
    expect(lines.join("")).toBe(`${"x".repeat(50_000)}tailnext`);
    expect(lines.at(-2)).toBe(`${"x".repeat(50_000 - 12 * 4096)}tail`);
    expect(lines.at(-1)).toBe("next");
  });

  test("a secret the cut would split is hidden whole, even when its end comes in a later read", async () => {
    const secret = "hf_SECRETtoken1234";
    const hide = secretHider(["--hf-token", secret], "k".repeat(32));
    // The cut at 64 falls inside the secret; its tail arrives in the next read.
    const line = `${"x".repeat(60)}${secret}${"y".repeat(200)}`;
    const at = 66;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(line.slice(0, at)));
        c.enqueue(new TextEncoder().encode(line.slice(at, 90)));
        c.enqueue(new TextEncoder().encode(line.slice(90)));
        c.close();
      },
    });
    const parts: string[] = [];
    // As the launch's reader: each part hidden on its own after the cut.
    await readLines(stream, (l) => parts.push(hide(l)), 64, hide);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.join("")).not.toContain(secret.slice(0, 8));
    expect(parts.join("")).not.toContain(secret.slice(-8));
    expect(parts.join("")).toBe(`${"x".repeat(60)}[redacted]${"y".repeat(200)}`);
    expect(Math.max(...parts.map((p) => p.length))).toBeLessThanOrEqual(64);
  });
});

test("a rotation with the most files the config allows (100) is quick", async () => {
  await using dir = tmpdir();
  const log = new RotatingLog(dir.path, 10, 100);
  // Each write rotates (10 bytes at most): the first hundred fill the line of files, untimed.
  for (let i = 0; i < 101; i++) log.write("0123456789abcdef\n");
  expect(readdirSync(dir.path)).toHaveLength(101);
  // Ten rotations of the full line take some 50 ms on a loaded machine (200 took 0.5 to 1 s,
  // too near a bound): 1 s is a rotation holding the loop 100 ms, far from any slowness of load.
  const t0 = performance.now();
  for (let i = 0; i < 10; i++) log.write("0123456789abcdef\n");
  const took = performance.now() - t0;
  log.close();
  expect(took).toBeLessThan(1000);
  expect(readdirSync(dir.path)).toHaveLength(101);
});

describe("path models' logs", () => {
  // Each distinct path a chat names gets a log of its own (server/model-runtime.ts instanceOf):
  // without a bound, a host whose users pick any file fills data_dir/logs over the months.
  test("past PATH_LOGS_KEPT, the least recently written groups go, rotations with them", () => {
    using dir = tmpdir();
    const digest = (i: number) => i.toString(16).padStart(12, "0");
    const base = Date.now() / 1000 - 10_000;
    for (let i = 0; i < PATH_LOGS_KEPT + 4; i++) {
      for (const suffix of ["", ".1"]) {
        const file = join(dir.path, `llama-server-path-${digest(i)}.log${suffix}`);
        writeFileSync(file, "x\n");
        utimesSync(file, base + i, base + i);
      }
    }
    writeFileSync(join(dir.path, "llama-server-chat.log"), "configured\n");
    utimesSync(join(dir.path, "llama-server-chat.log"), base - 100, base - 100);
    const log = new RotatingLog(dir.path, 1024, 2, `llama-server-path-${digest(999)}.log`);
    log.write("line\n");
    log.close();
    const groups = new Set(
      readdirSync(dir.path)
        .filter((n) => n.startsWith("llama-server-path-"))
        .map((n) => n.replace(/\.log(\.\d+)?$/, "")),
    );
    expect(groups.size).toBe(PATH_LOGS_KEPT);
    // The oldest five went whole (file and rotation); the newest and the one just opened stay.
    for (let i = 0; i < 5; i++) expect(groups.has(`llama-server-path-${digest(i)}`)).toBe(false);
    expect(groups.has(`llama-server-path-${digest(PATH_LOGS_KEPT + 3)}`)).toBe(true);
    expect(groups.has(`llama-server-path-${digest(999)}`)).toBe(true);
    expect(readdirSync(dir.path).filter((n) => n.startsWith(`llama-server-path-${digest(5)}`))).toHaveLength(
      2,
    );
    // A configured model's log is never pruned, however old.
    expect(readFileSync(join(dir.path, "llama-server-chat.log"), "utf8")).toBe("configured\n");
  });

  test("a configured model's log opened keeps PATH_LOGS_KEPT path logs, not one fewer", () => {
    using dir = tmpdir();
    for (let i = 0; i < PATH_LOGS_KEPT; i++)
      writeFileSync(join(dir.path, `llama-server-path-${i.toString(16).padStart(12, "0")}.log`), "x\n");
    new RotatingLog(dir.path, 1024, 2, "llama-server-chat.log").close();
    expect(readdirSync(dir.path).filter((n) => n.startsWith("llama-server-path-"))).toHaveLength(
      PATH_LOGS_KEPT,
    );
  });
});
