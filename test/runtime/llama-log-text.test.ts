import { describe, expect, test } from "bun:test";
import { llamaLogLine } from "../../src/runtime/llama-log-text.ts";
import { LogRedactor } from "../../src/runtime/log-redact.ts";

// llama-server's lines as `--log-colors on` writes them (llama.cpp common/log.cpp g_col): the
// time blue, a reset, the level's colour; a warning's reset after its newline.
const BLUE = "\u001b[34m";
const RESET = "\u001b[0m";
const MAGENTA = "\u001b[35m";
const GREEN = "\u001b[32m";

describe("llamaLogLine", () => {
  test("a plain line stays as it is", () => {
    const line = "0.00.010.000 I llama_model_loader: - kv   2:  general.name str = Qwen\t3";
    expect(llamaLogLine(line)).toBe(line);
  });

  test("a GGUF's name with ESC and C1 sequences is escaped, nothing raw left", () => {
    const line =
      "0.00.010.000 I llama_model_loader: - kv   2:  general.name str = x\u001b]0;pwned\u0007\u009b2J\u001b[2J\u202e";
    const out = llamaLogLine(line);
    expect(out).toBe(
      "0.00.010.000 I llama_model_loader: - kv   2:  general.name str = x\\u{1b}]0;pwned\\u{7}\\u{9b}2J\\u{1b}[2J\\u{202e}",
    );
    expect(out).not.toMatch(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/);
  });

  test("the prefix's colour codes stay, colour codes after it do not", () => {
    const info = `${BLUE}0.04.631.500${RESET} ${GREEN}I ${RESET}general.name str = \u001b[31mred\u001b[8m`;
    expect(llamaLogLine(info)).toBe(
      `${BLUE}0.04.631.500${RESET} ${GREEN}I ${RESET}general.name str = \\u{1b}[31mred\\u{1b}[8m`,
    );
    // A warning's reset opens the next line, before its prefix.
    const warn = `${RESET}${BLUE}0.04.631.600${RESET} ${MAGENTA}W slot 0: odd`;
    expect(llamaLogLine(warn)).toBe(warn);
    expect(llamaLogLine(RESET)).toBe(RESET);
  });

  test("a code in the prefix llama-server never writes (conceal, a background) is escaped", () => {
    const line = `\u001b[8m0.04.631.500 \u001b[30;40mI hidden`;
    expect(llamaLogLine(line)).toBe("\\u{1b}[8m0.04.631.500 \\u{1b}[30;40mI hidden");
  });

  test("log-redact still finds the message start of a coloured line written so (log-scrub re-reads it)", () => {
    const r = new LogRedactor();
    const quote = llamaLogLine(
      `${BLUE}0.04.631.360${RESET} ${MAGENTA}W common_chat_peg_parse: unparsed Content-only output: secret \u009b2J`,
    );
    expect(r.line(quote)).toBe(
      `${BLUE}0.04.631.360${RESET} ${MAGENTA}W common_chat_peg_parse: unparsed Content-only output: [model output not logged]`,
    );
    expect(r.line(llamaLogLine("more of the secret"))).toBeNull();
    const next = llamaLogLine(`${RESET}${BLUE}0.04.631.500${RESET} ${GREEN}I ${RESET}slot release`);
    expect(r.line(next)).toBe(next);
  });
});
