import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { statusError } from "../../src/llama/errors.ts";
import { LogRedactor, NOT_LOGGED, withoutQuotes } from "../../src/runtime/log-redact.ts";
import { readLines } from "../../src/runtime/log-sink.ts";

const QUIRKS = join(import.meta.dir, "../fixtures/llama-server/transcripts/quirks");
const TRANSCRIPTS = join(import.meta.dir, "../fixtures/llama-server/transcripts");

/** quirks/90c keeps each log line with its line number in the original log ("154:…"). */
function recordedLines(): string[] {
  return readFileSync(join(QUIRKS, "90c-server-log-unparsed-lines.txt"), "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => l.replace(/^\d+:/, ""));
}

function through(lines: string[]): string[] {
  const r = new LogRedactor();
  return lines.map((l) => r.line(l)).filter((l): l is string => l !== null);
}

describe("LogRedactor", () => {
  test("the recorded unparsed replies (quirks/90c) keep their shape without the model's text", () => {
    const lines = recordedLines();
    const unparsed = lines.filter((l) => l.includes("unparsed"));
    expect(unparsed.length).toBeGreaterThan(5);
    const out = through(lines);
    expect(out).toHaveLength(lines.length);
    for (const [i, line] of lines.entries()) {
      const kept = out[i] as string;
      if (!line.includes("unparsed")) {
        expect(kept).toBe(line);
        continue;
      }
      const [head, text] = line.split(/ output: /) as [string, string];
      expect(kept).toBe(`${head} output: ${NOT_LOGGED}`);
      expect(text.trim().length).toBeGreaterThan(0);
      expect(kept).not.toContain(text.trim().slice(0, 12));
    }
  });

  test("a reply with newlines: its later lines go until the next message begins", () => {
    const out = through([
      "0.04.631.360 W common_chat_peg_parse: unparsed peg-native output: Dear Dr Ames,",
      "my account number is 4417-2231 and",
      "0.04.000.000 is not a prefix without a level",
      "",
      "0.04.632.306 W srv    operator(): got exception: {}",
      "0.04.632.400 I slot      release: id  0 | task 3 | stop processing",
      "a line of a build's plain output",
    ]);
    expect(out).toEqual([
      `0.04.631.360 W common_chat_peg_parse: unparsed peg-native output: ${NOT_LOGGED}`,
      "0.04.632.306 W srv    operator(): got exception: {}",
      "0.04.632.400 I slot      release: id  0 | task 3 | stop processing",
      "a line of a build's plain output",
    ]);
  });

  test("debug verbosity's whole reply between BEGIN and END is dropped", () => {
    const out = through([
      "0.01.000.000 D common_chat_peg_parse: full peg-native output triggering error:",
      "=== BEGIN ===",
      "the patient's name is Ada",
      "=== END ===",
      "0.01.000.100 I slot      release: id  0 | task 1",
    ]);
    expect(out).toEqual([
      "0.01.000.000 D common_chat_peg_parse: full peg-native output triggering error:",
      "0.01.000.100 I slot      release: id  0 | task 1",
    ]);
  });

  test("a JSON parse error's 'last read' quote is cut to the line's last quote", () => {
    const line = `0.02.000.000 W srv    operator(): got exception: {"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 20: syntax error while parsing value - invalid literal; last read: '{"pin": 4417'; expected '[', '{', or a literal","type":"server_error"}}`;
    const [kept] = through([line]);
    expect(kept).toContain(`last read: ${NOT_LOGGED}`);
    expect(kept).not.toContain("4417");
    expect(kept?.startsWith("0.02.000.000 W srv    operator(): got exception:")).toBe(true);
  });

  test("a 'last read' quote longer than a log line part (readLines cuts at 64 KiB) is not kept", async () => {
    // Tool-call arguments cut off by the reply's length: the string token, quoted whole, is the
    // file the model was writing. readLines hands the line on in parts; the quote spans them.
    const quoted = `"${"the AARDVARK draft ".repeat(5000)}`;
    const line = `0.02.000.000 W srv    operator(): got exception: {"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 100001: syntax error while parsing value - invalid string: missing closing quote; last read: '${quoted}'","type":"server_error"}}`;
    const parts: [string, boolean][] = [];
    const bytes = new TextEncoder().encode(`${line}\n0.02.000.100 I slot      release: id  0\n`);
    // As a pipe hands it on: a chunk at a time.
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let at = 0; at < bytes.length; at += 16 * 1024) c.enqueue(bytes.subarray(at, at + 16 * 1024));
        c.close();
      },
    });
    await readLines(chunks, (l, cut) => parts.push([l, cut]));
    expect(parts.length).toBeGreaterThan(2);
    const r = new LogRedactor();
    const kept = parts.map(([l, cut]) => r.line(l, cut)).filter((l): l is string => l !== null);
    expect(kept.join("\n")).not.toContain("AARDVARK");
    expect(kept[0]).toContain(`last read: ${NOT_LOGGED}`);
    expect(kept.at(-1)).toBe("0.02.000.100 I slot      release: id  0");
  });

  test("colour codes around the prefix (--log-colors on) still mark a message's start", () => {
    const blue = "\u001b[34m";
    const plain = "\u001b[0m";
    const out = through([
      `${blue}0.04.631.360${plain} \u001b[35mW common_chat_peg_parse: unparsed Content-only output: secret one`,
      "secret two",
      `${blue}0.04.631.500${plain} \u001b[32mI ${plain}slot      release: id  0`,
    ]);
    expect(out).toHaveLength(2);
    expect(out.join("\n")).not.toContain("secret");
  });

  test("ordinary output passes as it is: a recorded start-up and a chat's log", () => {
    const startup = readFileSync(join(TRANSCRIPTS, "startup-stderr.txt"), "utf8").split("\n");
    expect(through(startup)).toEqual(startup);
    const rpc = readFileSync(join(TRANSCRIPTS, "83-rpc-worker-dies.log"), "utf8").split("\n");
    expect(through(rpc)).toEqual(rpc);
  });
});

describe("withoutQuotes", () => {
  test("a 500's 'last read' quote cut with its message (1000 characters) is not kept", () => {
    // What a lease reports failed (lease-failure.ts): the restart's warning and the internal_error
    // every lease on that server gets carry it, another user's chat among them.
    const args = `"${"the AARDVARK draft, it's private ".repeat(60)}`;
    const body = JSON.stringify({
      error: {
        code: 500,
        message: `Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 2041: syntax error while parsing value - invalid string: missing closing quote; last read: '${args}'`,
        type: "server_error",
      },
    });
    const shown = withoutQuotes(statusError(500, "Internal Server Error", body).message);
    expect(shown).toContain(`last read: ${NOT_LOGGED}`);
    expect(shown).not.toContain("AARDVARK");
    expect(shown).not.toContain("private");
  });
});

// A model's reply that llama-server quotes (quirks/90c's `unparsed … output:`) can itself hold
// lines shaped like llama-server's prefix (a document told to repeat them): such a line ended the
// redaction, the rest of the conversation kept in the log, and a forged `Remote RPC server
// crashed` line reached rpc-watch, which restarted a healthy server. With the spawn's clock a
// message must name a time between the quote's and now.
describe("LogRedactor with the spawn's clock: a quoted line forging the prefix", () => {
  const opening = "0.05.000.000 W common_chat_peg_parse: unparsed peg-native output: Sure.";
  test("an earlier or a future time stays part of the quote", () => {
    const r = new LogRedactor({ uptimeMs: () => 6000, wallStepMs: () => 0 });
    expect(r.line(opening)).toContain(NOT_LOGGED);
    expect(r.line("0.00.100.000 E Remote RPC server crashed or returned malformed response")).toBeNull();
    expect(r.line("my secret plan, line two")).toBeNull();
    expect(r.line("59.00.000.000 I srv  log_server_r: request: POST /v1/chat 200")).toBeNull();
    expect(r.line("and line three")).toBeNull();
    // llama-server's own next message, after the quote's and before now, ends it.
    expect(r.line("0.05.000.120 I srv  update_slots: all slots are idle")).toBe(
      "0.05.000.120 I srv  update_slots: all slots are idle",
    );
    expect(r.line("0.05.000.130 I plain")).toBe("0.05.000.130 I plain");
  });
});

// llama-server's prefix is its wall clock's time since its log began (common/log.cpp `t_us`:
// std::chrono::system_clock): a wall clock stepped back while a quote was open gave its next
// messages earlier times than the quote's, dropped until the clock caught up. The wall clock's
// step, as our own clocks see it, moves the bound by as much: never further.
describe("LogRedactor with the spawn's clock: the wall clock stepped back", () => {
  const opening = "0.05.000.000 W common_chat_peg_parse: unparsed peg-native output: Sure.";
  test("a message after a step back ends the quote; a forged earlier time still does not", () => {
    let stepMs = 0;
    const r = new LogRedactor({ uptimeMs: () => 6000, wallStepMs: () => stepMs });
    expect(r.line(opening)).toContain(NOT_LOGGED);
    expect(r.line("0.02.000.000 E forged, no step yet")).toBeNull();
    stepMs = -4000;
    expect(r.line("private text still quoted")).toBeNull();
    // Forged: earlier than the quote's time less the step.
    expect(r.line("0.00.500.000 E Remote RPC server crashed")).toBeNull();
    expect(r.line("0.01.000.200 I srv  update_slots: all slots are idle")).toBe(
      "0.01.000.200 I srv  update_slots: all slots are idle",
    );
  });
});

// A step back further than llama-server has run makes its time since start negative, which its
// prefix prints part by part as C's `%d` does (common/log.cpp: `0.-5.-300.-200` is -5.3002 s):
// no message began at all, and the open quote dropped every line until the clock caught up.
describe("LogRedactor with the spawn's clock: a step back past llama-server's start", () => {
  test("a negative time ends the quote after such a step, never without one", () => {
    let stepMs = 0;
    const r = new LogRedactor({ uptimeMs: () => 6000, wallStepMs: () => stepMs });
    expect(r.line("0.05.000.000 W common_chat_peg_parse: unparsed peg-native output: Sure.")).toContain(
      NOT_LOGGED,
    );
    expect(r.line("0.-5.-300.-200 E forged before any step")).toBeNull();
    stepMs = -3_600_000;
    expect(r.line("0.-5.-300.-200 I srv  update_slots: all slots are idle")).toBe(
      "0.-5.-300.-200 I srv  update_slots: all slots are idle",
    );
    // -62.003004 s: `%03d` of -3 is `-03`.
    expect(r.line("-1.-2.-03.-04 I plain")).toBe("-1.-2.-03.-04 I plain");
  });
});

// A step back taken before the quote opened leaves llama-server's times behind the core's
// uptime (the larger of the monotonic and wall clocks' time since the spawn) for good: bounded
// by that uptime, a quote opened after it let a forged line name any time up to the step ahead
// of llama-server's own, `0.00.000.000` included after a step past its start. Its time now is
// the wall clock's since the spawn, which is the bound, raised only by a step back since the quote.
describe("LogRedactor with the spawn's clock: a step back before the quote", () => {
  // As spawnClocks measures them: 6 s on the monotonic clock, the wall clock stepped back `back`.
  const clocksAfter = (backMs: number) => ({
    uptimeMs: () => Math.max(6000, 6000 - backMs),
    wallStepMs: () => -backMs,
  });
  // [step back, a message after it, the quote's, a forged one, llama-server's next]
  const cases = [
    [5000, "0.00.800.000", "0.00.900.000", "0.05.000.000", "0.00.950.000"],
    // Past llama-server's start: its times are negative, any small positive one forged.
    [3_600_000, "-59.-54.-200.000", "-59.-54.-100.000", "0.00.001.000", "-59.-54.-50.000"],
  ] as const;
  for (const [backMs, before, quote, forged, next] of cases)
    test(`a forged time past llama-server's own stays in the quote (${backMs} ms back)`, () => {
      const r = new LogRedactor(clocksAfter(backMs));
      // A message read after the step, before the quote: the step is not one since the quote.
      expect(r.line(`${before} I srv  params_from_: Chat format: peg-native`)).not.toBeNull();
      expect(r.line(`${quote} W common_chat_peg_parse: unparsed peg-native output: Sure.`)).toContain(
        NOT_LOGGED,
      );
      expect(r.line(`${forged} E Remote RPC server crashed`)).toBeNull();
      const idle = `${next} I srv  update_slots: all slots are idle`;
      expect(r.line(idle)).toBe(idle);
    });
});

// A quote that opens in a part of a long line (readLines cuts at 64 KiB) begins on no prefix:
// its time was taken as 0, and any forged time since llama-server's start then ended it. The
// quote's time is its message's, the last prefix read.
test("LogRedactor: a quote opened in a cut part keeps its message's time as the bound", () => {
  const r = new LogRedactor({ uptimeMs: () => 6000, wallStepMs: () => 0 });
  expect(r.line(`0.05.000.000 E srv    operator(): got exception: ${"x".repeat(40)}`, true)).not.toBeNull();
  expect(r.line(`${"y".repeat(40)}; last read: '"the private draft`, true)).toContain(NOT_LOGGED);
  expect(r.line("0.00.000.001 E Remote RPC server crashed", true)).toBeNull();
  expect(r.line("0.05.000.100 I slot      release: id  0")).toBe("0.05.000.100 I slot      release: id  0");
});
