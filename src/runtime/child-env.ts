/**
 * The child's environment, built rather than inherited: every LLAMA_ARG_* variable would
 * silently change a llama-server flag, and an inherited LLAMA_API_KEY would replace ours.
 * The key travels here, never on the command line (/proc/<pid>/cmdline is world-readable).
 */
export function childEnv(parent: Record<string, string | undefined>, apiKey: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(parent)) {
    if (value === undefined) continue;
    if (key.toUpperCase().startsWith("LLAMA_ARG_") || key.toUpperCase() === "LLAMA_API_KEY") continue;
    env[key] = value;
  }
  env.LLAMA_API_KEY = apiKey;
  return env;
}

/** 32 random bytes, hex: a fresh key per launch. */
export function randomApiKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
