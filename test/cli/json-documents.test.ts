import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { terminalJson } from "../../src/util/terminal-text.ts";

// The CLI's `--json` output (documents, pull's NDJSON, a failure's error document) reaches a
// terminal or a log viewer and quotes the hub's file names, a GGUF's text, a path: JSON.stringify
// escapes C0 controls only and wrote DEL and C1 (U+009B opens a sequence as ESC [ does) raw.
// Every one goes through terminalJson (util/terminal-text.ts), which escapes them and keeps the text.
const CLI = join(import.meta.dir, "../../src/cli");

test("no CLI command writes JSON with JSON.stringify", () => {
  const bare = readdirSync(CLI)
    .filter((f) => f.endsWith(".ts"))
    .filter((f) => readFileSync(join(CLI, f), "utf8").includes("JSON.stringify("));
  expect(bare).toEqual([]);
});

test("terminalJson: one line as JSON.stringify's, C1 and DEL escaped, the same value read back", () => {
  const event = { type: "event", file: "model\u009b2J\u007f.gguf", done: 1 };
  const line = terminalJson(event);
  expect(line).toBe('{"type":"event","file":"model\\u009b2J\\u007f.gguf","done":1}');
  expect(JSON.parse(line)).toEqual(event);
});
