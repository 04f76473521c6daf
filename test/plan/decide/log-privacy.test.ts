import { describe, expect, test } from "bun:test";
import { logPrivacyWarnings } from "../../../src/plan/decide/log-privacy.ts";

describe("logPrivacyWarnings", () => {
  test("debug verbosity, in every spelling llama-server takes, and only from debug on", () => {
    for (const args of [
      ["-v"],
      ["--verbose"],
      ["--log-verbose"],
      ["-lv", "5"],
      ["--verbosity", "9"],
      ["--log-verbosity=5"],
    ])
      expect(logPrivacyWarnings(args)).toEqual([expect.stringContaining("logs prompts and replies")]);
    for (const args of [["-lv", "4"], ["--log-verbosity=3"], ["--temp", "5"], []])
      expect(logPrivacyWarnings(args)).toEqual([]);
  });

  test("a log or prompt folder of llama-server's own, named", () => {
    expect(logPrivacyWarnings(["--log-prompts-dir", "/p"])).toEqual([
      expect.stringContaining("to /p itself"),
    ]);
    expect(logPrivacyWarnings(["--log-file=/l"])).toEqual([expect.stringContaining("to /l itself")]);
  });

  test("the message prefix turned off: the redactor cannot find a quote's end", () => {
    expect(logPrivacyWarnings(["--no-log-prefix", "--no-log-timestamps"])).toEqual([
      expect.stringContaining("--no-log-prefix: without llama-server's message prefix"),
      expect.stringContaining("--no-log-timestamps: without llama-server's message prefix"),
    ]);
    expect(logPrivacyWarnings(["--log-prefix", "--log-timestamps"])).toEqual([]);
  });

  test("the spellings with `_` llama-server reads as `-` (common/arg.cpp) warn the same", () => {
    expect(logPrivacyWarnings(["--log_file", "/l"])).toEqual([expect.stringContaining("to /l itself")]);
    expect(logPrivacyWarnings(["--log_prompts_dir", "/p"])).toEqual([
      expect.stringContaining("to /p itself"),
    ]);
    expect(logPrivacyWarnings(["--log_verbosity", "5"])).toEqual([
      expect.stringContaining("logs prompts and replies"),
    ]);
    expect(logPrivacyWarnings(["--no_log_prefix"])).toEqual([
      expect.stringContaining("without llama-server's message prefix"),
    ]);
  });
});
