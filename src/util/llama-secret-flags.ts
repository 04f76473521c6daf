/**
 * llama-server flags whose value is a secret: a key its HTTP API demands, the Hugging Face token it
 * downloads with, and inline MCP server definitions (their headers and env carry tokens). Masked
 * where the plan is shown (plan/secret-args.ts) and refused joined to their value in one
 * `extra_args` entry (config/extra-args.ts).
 */
export const SECRET_FLAGS: ReadonlySet<string> = new Set([
  "--api-key",
  "--hf-token",
  "-hft",
  "--mcp-servers-json",
]);

/** Flags whose value is a URL, which may carry a user:password or a token in its query. */
export const URL_FLAGS: ReadonlySet<string> = new Set(["--model-url", "-mu", "--mmproj-url", "-mmu"]);
