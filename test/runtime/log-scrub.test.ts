import { describe, expect, spyOn, test } from "bun:test";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { NOT_LOGGED } from "../../src/runtime/log-redact.ts";
import { REDACTED_MARK, redactEarlierLogs } from "../../src/runtime/log-scrub.ts";
import { RotatingLog } from "../../src/runtime/log-sink.ts";
import { logger } from "../../src/util/logger.ts";
import { holdOpen } from "../fixtures/held-file.ts";
import { refuseOpenForWriting } from "../fixtures/refused-open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A core from before the redactor kept llama-server's lines as they came: a reply quoted in
// them (quirks/90c's shape) outlived the user's erase. The first start that opens the logs
// folder puts its files through the redactor once (docs/supervisor.md, "No conversation in the log").
const OLD = [
  "--- 2026-11-30T08:00:00.000Z start /bin/llama-server -m m.gguf (pid 7)",
  "0.00.040.272 I srv  llama_server: listening on http://127.0.0.1:41739",
  "0.04.631.360 W common_chat_peg_parse: unparsed peg-native output: Dear Dr Ames,",
  "my account is ZQX-4417",
  "--- 2026-11-30T08:01:00.000Z start /bin/llama-server -m m.gguf (pid 9)",
  "0.00.010.000 I srv  llama_server: listening on http://127.0.0.1:41740",
  "",
].join("\n");

/** `log` as the pass leaves it, written to `dir` beside an earlier pass's `mark` (read again). */
async function scrubbed(dir: string, log: string, mark: string): Promise<string> {
  writeFileSync(join(dir, "llama-server.log"), log, { mode: 0o600 });
  writeFileSync(join(dir, mark), "");
  await redactEarlierLogs(dir);
  return readFileSync(join(dir, "llama-server.log"), "utf8");
}

describe("redactEarlierLogs", () => {
  test("every llama-server log and rotation is redacted in place, once; other files are left alone", async () => {
    await using dir = tmpdir();
    const logs = join(dir.path, "logs");
    mkdirSync(logs);
    for (const name of ["llama-server.log", "llama-server.log.1", "llama-server-embed.log", "notes.txt"])
      writeFileSync(join(logs, name), OLD, { mode: 0o600 });
    new RotatingLog(logs, 1000, 3).close();
    // The pass the log began (its replaced files' zeroing) is this one, waited for.
    await redactEarlierLogs(logs);
    for (const name of ["llama-server.log", "llama-server.log.1", "llama-server-embed.log"]) {
      const text = readFileSync(join(logs, name), "utf8");
      expect(text).not.toContain("ZQX-4417");
      expect(text).toContain(`unparsed peg-native output: ${NOT_LOGGED}`);
      // The next launch's header and lines survive the quote before them.
      expect(text).toContain("(pid 9)\n0.00.010.000 I srv  llama_server: listening");
      expect(statSync(join(logs, name)).mode & 0o777).toBe(0o600);
    }
    expect(readFileSync(join(logs, "notes.txt"), "utf8")).toBe(OLD);
    expect(existsSync(join(logs, REDACTED_MARK))).toBe(true);
    // Once only: a folder already marked is not read again.
    writeFileSync(join(logs, "llama-server.log.2"), OLD);
    redactEarlierLogs(logs);
    expect(readFileSync(join(logs, "llama-server.log.2"), "utf8")).toBe(OLD);
  });

  test.skipIf(process.platform === "win32")(
    "a half-written copy from a crash is removed; a link is not followed",
    async () => {
      await using dir = tmpdir();
      const target = join(dir.path, "theirs.log");
      writeFileSync(target, OLD);
      writeFileSync(join(dir.path, "llama-server.log.redacting"), OLD);
      symlinkSync(target, join(dir.path, "llama-server.log"));
      await redactEarlierLogs(dir.path);
      expect(readFileSync(target, "utf8")).toBe(OLD);
      expect(readdirSync(dir.path).sort()).toEqual([REDACTED_MARK, "llama-server.log", "theirs.log"]);
    },
  );
});

// A reply quoted whole in an older core's log may hold a diff or a Markdown line of its own that
// begins "--- " (`--- a/src/app.ts`): read as a launch's start line, it ended the quote, and the
// rest of the reply was kept through every pass. Only the start line's own shape begins a launch.
describe("redactEarlierLogs, on a quoted line that begins like a start line", () => {
  test("the quote goes on past it, also in a folder an earlier pass marked done", async () => {
    await using dir = tmpdir();
    const quoted = [
      "--- 2026-11-30T08:00:00.000Z start /bin/llama-server -m m.gguf (pid 7)",
      "0.04.631.360 W common_chat_peg_parse: unparsed peg-native output: Here is the patch:",
      "--- a/notes/ames-diagnosis.md",
      "+++ b/notes/ames-diagnosis.md",
      "+ZQX-4417 tested positive",
      "--- end of patch ---",
      "0.05.000.000 I srv  llama_server: all slots are idle",
      "",
    ].join("\n");
    const text = await scrubbed(dir.path, quoted, ".redacted-3");
    for (const line of ["ames-diagnosis", "ZQX-4417", "end of patch"]) expect(text).not.toContain(line);
    expect(text).toContain(`unparsed peg-native output: ${NOT_LOGGED}\n0.05.000.000 I srv`);
    expect(text).toContain("(pid 7)\n");
    expect(readdirSync(dir.path).sort()).toEqual([REDACTED_MARK, "llama-server.log"]);
  });
});

// A core before 2026-12-05 (secret-args.ts) wrote llama-server's arguments into the start line as
// given: an HF token or an MCP server's header from llama.extra_args, and llama-server's own
// lines quoting one, stayed in the log for whoever reads or pastes it.
describe("redactEarlierLogs, on an earlier core's start line", () => {
  test("the values of secret flags are masked there and in its launch's lines", async () => {
    await using dir = tmpdir();
    const token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345";
    const bearer = "sk-live-0123456789abcdef";
    const old = [
      `--- 2026-12-01T08:00:00.000Z start /bin/llama-server -m /models/my model.gguf --hf-token ${token} --mcp-servers-json {"s": {"headers": {"Authorization": "Bearer ${bearer}"}}} --port 8080 (pid 7)`,
      `0.00.002.000 E common_download_file: 401 with token ${token}`,
      "",
    ].join("\n");
    const text = await scrubbed(dir.path, old, ".redacted-3");
    for (const secret of [token, bearer]) expect(text).not.toContain(secret);
    expect(text).toContain(
      "start /bin/llama-server -m /models/my model.gguf --hf-token *** --mcp-servers-json *** --port 8080 (pid 7)",
    );
    expect(text).toContain("401 with token [redacted]");
  });
});

describe("redactEarlierLogs, on a quote cut for length", () => {
  // A core before the cut-aware redactor kept a `last read: '…'` quote's 64 KiB parts: the first
  // (no closing quote, or cut at a quote inside it) and the prefix-less parts after it.
  const cutLines = [
    "--- 2026-12-01T08:00:00.000Z start /bin/llama-server -m m.gguf (pid 7)",
    `0.01.000.000 E srv    send_error: task id = 3, error: got exception: [json.exception.parse_error.101] parse error: invalid string; last read: '"{\\"path\\": \\"/home/ames/diary ${"d".repeat(100)}`,
    "PART-TWO-OF-THE-DIARY",
    `0.01.000.100 E srv    send_error: task id = 4, error: got exception: [json.exception.parse_error.101] parse error: invalid string; last read: ${NOT_LOGGED}s ZQX-4417 account`,
    "PART-TWO-OF-THE-ACCOUNT",
    "0.01.000.200 I srv  llama_server: listening on http://127.0.0.1:41739",
    "",
  ].join("\n");

  test("its parts are dropped, also in a folder an older redactor marked done", async () => {
    await using dir = tmpdir();
    const text = await scrubbed(dir.path, cutLines, ".redacted");
    for (const quoted of ["/home/ames/diary", "PART-TWO-OF-THE-DIARY", "ZQX-4417", "PART-TWO-OF-THE-ACCOUNT"])
      expect(text).not.toContain(quoted);
    expect(text).toContain(
      `task id = 3, error: got exception: [json.exception.parse_error.101] parse error: invalid string; last read: ${NOT_LOGGED}`,
    );
    expect(text).toContain("listening on http://127.0.0.1:41739");
  });
});

// A core before llama-log-text.ts wrote a GGUF's metadata as llama-server printed it: its ESC and
// C1 (U+009B) sequences stayed in the file for whoever `cat`s it, in a folder marked done.
describe("an earlier log's raw controls", () => {
  test("are escaped once, also in a folder marked done before; the prefix's colours stay", async () => {
    await using dir = tmpdir();
    const coloured = "\u001b[34m0.00.020.000\u001b[0m \u001b[32mI \u001b[0mprint_info: file type = Q4_K";
    const raw = [
      "--- 2026-11-30T08:00:00.000Z start /bin/llama-server -m m.gguf (pid 7)",
      "0.00.010.000 I llama_model_loader: - kv   2:  general.name str = Q\u001b]0;owned\u0007\u009b2J",
      coloured,
      "",
    ].join("\n");
    const text = await scrubbed(dir.path, raw, ".redacted-2");
    expect(text).not.toMatch(/[\u0000-\u0008\u000b-\u001a\u001c-\u001f\u007f-\u009f]/);
    expect(text).toContain("general.name str = Q\\u{1b}]0;owned\\u{7}\\u{9b}2J");
    expect(text).toContain(coloured);
    expect(readdirSync(dir.path).sort()).toEqual([REDACTED_MARK, "llama-server.log"]);
  });
});

// Renamed over or unlinked alone, an earlier log's blocks keep the reply it quoted (docs/agent.md,
// The store). A descriptor the test holds (fixtures/held-file.ts) reads the file's blocks after.
/** The warnings logged while `run` ran. */
async function warnedWhile(run: () => Promise<unknown>): Promise<string[]> {
  const lines: string[] = [];
  const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
  try {
    await run();
  } finally {
    warn.mockRestore();
  }
  return lines;
}

describe("redactEarlierLogs, on the disk", () => {
  test("the file a redacted one replaced is zeroed", async () => {
    await using dir = tmpdir();
    const log = join(dir.path, "llama-server.log");
    writeFileSync(log, OLD, { mode: 0o600 });
    using blocks = holdOpen(log);
    await redactEarlierLogs(dir.path);
    expect(readFileSync(log, "utf8")).not.toContain("ZQX-4417");
    const kept = blocks.read();
    expect(kept.length).toBe(Buffer.byteLength(OLD));
    expect(kept.every((b) => b === 0)).toBe(true);
  });

  test("one too large to read is zeroed before its blocks are freed", async () => {
    await using dir = tmpdir();
    const log = join(dir.path, "llama-server.log.1");
    writeFileSync(log, OLD, { mode: 0o600 });
    truncateSync(log, 65 * 1024 * 1024);
    using blocks = holdOpen(log);
    await redactEarlierLogs(dir.path);
    expect(existsSync(log)).toBe(false);
    expect(blocks.read().includes("ZQX-4417")).toBe(false);
  });

  // The same for one too large to read, removed rather than replaced (48210bc7 logged both; only
  // the replaced one was tested). Set aside first: the refusal is on its aside name.
  test("one too large to read that could not be opened to be zeroed is removed, logged", async () => {
    await using dir = tmpdir();
    const log = join(dir.path, "llama-server.log.1");
    writeFileSync(log, OLD, { mode: 0o600 });
    truncateSync(log, 65 * 1024 * 1024);
    using _refused = refuseOpenForWriting(`${log}.zeroing`);
    const lines = await warnedWhile(() => redactEarlierLogs(dir.path));
    expect(existsSync(log) || existsSync(`${log}.zeroing`)).toBe(false);
    expect(lines.filter((l) => l.includes(log) && l.includes("removed all the same"))).toHaveLength(1);
  });

  // docs/agent.md (The store): a file the core cannot open for writing (a read-only mount, another
  // owner's) goes all the same, logged, so that its blocks still holding the words is known. The
  // earlier log replaced by its redacted copy went without a word. Root opens any file for writing:
  // the refusal is faked on the open.
  test("one replaced that could not be opened to be zeroed is logged", async () => {
    await using dir = tmpdir();
    const log = join(dir.path, "llama-server.log");
    writeFileSync(log, OLD, { mode: 0o600 });
    using _refused = refuseOpenForWriting(log);
    const lines = await warnedWhile(() => redactEarlierLogs(dir.path));
    expect(readFileSync(log, "utf8")).not.toContain("ZQX-4417");
    expect(lines.filter((l) => l.includes(log) && l.includes("not zeroed"))).toHaveLength(1);
  });
});
