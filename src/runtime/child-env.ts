import { allowedEnv } from "../util/child-allowlist.ts";

export { passesToChild } from "../util/child-allowlist.ts";

/**
 * llama-server's environment: the allowlist (util/child-allowlist.ts) plus the per-launch key. The key
 * travels here, never on the command line (/proc/<pid>/cmdline is world-readable).
 * `GGML_NO_BACKTRACE`: on an abort ggml attaches gdb (where installed) and writes its backtrace,
 * some thirty lines, into the log after the abort's own message, so the log tail a host is shown
 * held the debugger's frames instead of the reason (docs/supervisor.md "The child's environment").
 */
export function childEnv(
  parent: Record<string, string | undefined>,
  apiKey: string,
  platform: NodeJS.Platform = process.platform,
): Record<string, string> {
  return { ...allowedEnv(parent, platform), GGML_NO_BACKTRACE: "1", LLAMA_API_KEY: apiKey };
}

/** What a probe of the binary (`--help`, the child-mode check) runs with: the child's, no key. */
export function probeEnv(parent: Record<string, string | undefined>): Record<string, string> {
  const { LLAMA_API_KEY: _key, ...env } = childEnv(parent, "");
  return env;
}

/** 32 random bytes, hex: a fresh key per launch. */
export function randomApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
