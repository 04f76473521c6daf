import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { PLAN_DIALECT, renderArgv } from "../../src/plan/argv.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { planFor } from "../../src/plan/planner.ts";
import { MASKED, maskedSecrets, secretsByEnv, shownArgs } from "../../src/plan/secret-args.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * A Hugging Face token or an API key written in llama.extra_args reaches llama-server, but never
 * the plan report (`plan`, doctor's plan checks, the protocol's `plan`), which people paste into
 * issues: it printed `--hf-token hf_…` in the decision and in argv.
 */
const SECRETS = ["--hf-token", "hf_TOKEN1", "-hft", "hf_TOKEN2", "--api-key=sk-KEY3", "--api-key", "sk-KEY4"];

describe("secret values in llama.extra_args", () => {
  test("shownArgs masks each form and leaves everything else as written", () => {
    expect(shownArgs([...SECRETS, "--temp", "0.2", "--api-key-file", "/k"])).toEqual([
      "--hf-token",
      MASKED,
      "-hft",
      MASKED,
      `--api-key=${MASKED}`,
      "--api-key",
      MASKED,
      "--temp",
      "0.2",
      "--api-key-file",
      "/k",
    ]);
  });

  test("llama-server's other spellings and secret-bearing flags are masked too", () => {
    // common/arg.cpp (b10587) turns '_' into '-' in a '--' flag, so --api_key is --api-key;
    // --mcp-servers-json is inline MCP server definitions, their headers and env tokens included.
    const mcp = '{"mcpServers":{"gh":{"url":"https://x","headers":{"Authorization":"Bearer ghp_SECRET5"}}}}';
    const args = ["--api_key", "sk-KEY6", "--hf_token", "hf_TOKEN7", "--mcp-servers-json", mcp];
    const shown = shownArgs(args).join(" ");
    for (const secret of ["sk-KEY6", "hf_TOKEN7", "ghp_SECRET5"]) expect(shown).not.toContain(secret);
    expect(shownArgs(["--mcp_servers_json", mcp])).toEqual(["--mcp_servers_json", MASKED]);
  });

  test("the plan report never holds them; the launch llama-server gets still does", async () => {
    using dir = tmpdir();
    const model = modelInfo(await readGgufHeader(writeGguf(dir.path, "m.gguf", tinyLlama())));
    const config = ConfigSchema.parse({ llama: { extra_args: [...SECRETS, "--temp", "0.2"] } });
    const { launch, plan } = planFor(model, cpuOnlyMachine(), config);
    const report = JSON.stringify(plan);
    for (const secret of ["hf_TOKEN1", "hf_TOKEN2", "sk-KEY3", "sk-KEY4"])
      expect(report).not.toContain(secret);
    expect(plan.argv.slice(-2)).toEqual(["--temp", "0.2"]);
    expect(renderArgv(launch, PLAN_DIALECT)).toEqual(expect.arrayContaining(SECRETS));
  });

  test("a URL's user:password and query are masked, the rest shown; one that does not parse, whole", () => {
    const args = [
      "--model-url",
      "https://me:pw@hf.example/m.gguf?token=T1",
      "-mmu=https://hf.example/p.gguf",
    ];
    expect(shownArgs([...args, "--mmproj-url", "not a url"])).toEqual([
      "--model-url",
      `https://${MASKED}@hf.example/m.gguf?${MASKED}`,
      "-mmu=https://hf.example/p.gguf",
      "--mmproj-url",
      MASKED,
    ]);
  });

  test("secretsByEnv takes out what llama-server reads from its environment (common/arg.cpp set_env)", () => {
    const mcp = '{"mcpServers":{}}';
    const { argv, env } = secretsByEnv([
      "--hf-token",
      "hf_A",
      "--temp",
      "0.2",
      "-hft=hf_B",
      "--mcp_servers_json",
      mcp,
      "-mu",
      "https://u:p@h/m.gguf",
      "--api-key",
      "sk-C",
      "--hf-token",
    ]);
    // The last token given wins, as on the command line; the caller puts the launch's key before --api-key's.
    expect(env).toEqual({
      HF_TOKEN: "hf_B",
      LLAMA_ARG_MCP_SERVERS_JSON: mcp,
      LLAMA_ARG_MODEL_URL: "https://u:p@h/m.gguf",
      LLAMA_API_KEY: "sk-C",
    });
    expect(argv).toEqual(["--temp", "0.2", "--hf-token"]);
  });
});

/**
 * A secret flag misspelt (`--api-keyy`, `--hf-tokn`) is unknown to llama-server, which refuses
 * it, but the plan, the log's start line and status showed its value as written before that.
 */
describe("a flag whose name looks like a secret's, known to llama-server or not", () => {
  test("its value is masked, as a separate entry or after =", () => {
    const args = [
      "--api-keyy",
      "sk_live_ONE",
      "--hf-tokn",
      "hf_TWO",
      "--GITHUB_TOKEN",
      "ghp_THREE",
      "--my-Password=pw_FOUR",
      "--x-auth",
      "au_FIVE",
    ];
    expect(shownArgs(args)).toEqual([
      "--api-keyy",
      MASKED,
      "--hf-tokn",
      MASKED,
      "--GITHUB_TOKEN",
      MASKED,
      `--my-Password=${MASKED}`,
      "--x-auth",
      MASKED,
    ]);
  });

  test("other flags, llama-server's key-file paths and a flag after one stay as written", () => {
    const args = ["--ctx-size", "4096", "--ssl-key-file", "/etc/k.pem", "--api-key-file", "/k", "-k", "x"];
    expect(shownArgs(args)).toEqual(args);
    expect(shownArgs(["--secret-mode", "--ctx-size", "4096"])).toEqual([
      "--secret-mode",
      "--ctx-size",
      "4096",
    ]);
    expect(shownArgs(["--hf-repo", "a/b", "--top-k", "40"])).toEqual(["--hf-repo", "a/b", "--top-k", "40"]);
  });

  test("llama-server's own flags whose name holds a secret's word show their counts", () => {
    // common/arg.cpp (b10587): counts, not secrets. The plan's own `--image-max-tokens 128` for a
    // projector read `***` in `plan`'s argv and the log's start line.
    const own = [
      "--image-max-tokens",
      "128",
      "--image-min-tokens",
      "64",
      "--mtmd-batch-max-tokens",
      "1024",
      "--print-token-count",
      "10",
      "--cors-credentials",
      "--no-cors-credentials",
    ];
    expect(shownArgs(own)).toEqual(own);
    expect(shownArgs(["--image-max-tokens=128"])).toEqual(["--image-max-tokens=128"]);
    // Nor is a count of six digits hidden in every log line that holds it.
    expect(maskedSecrets(["--mtmd-batch-max-tokens", "100000"])).toEqual([]);
  });
});
