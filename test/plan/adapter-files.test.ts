import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { launchFingerprint } from "../../src/agent/kv/fingerprint.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { parseProps } from "../../src/llama/props.ts";
import { adapterFiles } from "../../src/plan/adapter-files.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// llama-server reads each list as a CSV row (common/arg.cpp parse_csv_row): a path holding a comma
// is given in double quotes, "" within them a quote. Split at every comma, such a path named two
// files that do not exist, and the launch's fingerprint was none: prompt reuse off, silently.

test("a quoted adapter path keeps its commas and quotes", () => {
  expect(adapterFiles(["--lora", '"/m/LoRAs, v2/style.gguf",/m/b.gguf'])).toEqual([
    "/m/LoRAs, v2/style.gguf",
    "/m/b.gguf",
  ]);
  expect(adapterFiles(['--lora-scaled="/m/a ""x"", y.gguf:0.5",/m/b.gguf:1'])).toEqual([
    '/m/a "x", y.gguf',
    "/m/b.gguf",
  ]);
  // A quote inside an unquoted field is a character of the path, as llama-server reads it.
  expect(adapterFiles(["--control-vector", '/m/a"b.gguf'])).toEqual(['/m/a"b.gguf']);
});

test("an adapter whose path holds a comma still has its launch fingerprinted", async () => {
  await using dir = tmpdir();
  const model = join(dir.path, "model.gguf");
  const lora = join(dir.path, "style, v2.gguf");
  writeFileSync(model, "model");
  writeFileSync(lora, "adapter");
  const props = parseProps({ model_path: model, default_generation_settings: { n_ctx: 2048 } });
  const llama = ConfigSchema.parse({}).llama;
  const extraArgs = ["--lora", `"${lora}"`];
  expect(launchFingerprint(props, llama, { projector: null, extraArgs })).toBeDefined();
});
