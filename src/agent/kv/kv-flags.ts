import { argsWithout } from "../../plan/argv.ts";

/**
 * llama-server's flags (common/arg.cpp, b10587) that cannot change whether a saved slot's state is
 * valid: how many threads and on which cores, at what priority, polling or not (the draft model's
 * too), the HTTP server, its endpoints, key and timeouts, the web UI, the log. Each with whether it
 * takes a value. Hashed whole, `--threads 4` added to `llama.extra_args` dropped every session's
 * saved slot. Not memory's list (server/vector-flags.ts): it leaves out `-fa`, `-c`, `-ub`, the
 * placement, which decide no vector but do decide a KV state's layout, and llama.cpp refuses or
 * misreads a state restored under another. Any flag not named here counts (`-fa`, `-c`, `-ctk`,
 * `--lora`, `-ngl`, `--mlock`…, and one a later build adds): a flag missed costs a prompt processed
 * again, a flag wrongly left out restores a state the server cannot read.
 */
const VALUED = [
  ...["-t", "--threads", "-tb", "--threads-batch", "-C", "--cpu-mask", "-Cr", "--cpu-range"],
  ...["--cpu-strict", "--prio", "--poll", "-Cb", "--cpu-mask-batch", "-Crb", "--cpu-range-batch"],
  ...["--cpu-strict-batch", "--prio-batch", "--poll-batch", "--numa"],
  ...["--spec-draft-threads", "-td", "--threads-draft", "--spec-draft-threads-batch", "-tbd"],
  ...["--threads-batch-draft", "--spec-draft-cpu-mask", "-Cd", "--cpu-mask-draft"],
  ...["--spec-draft-cpu-range", "-Crd", "--cpu-range-draft", "--spec-draft-cpu-strict"],
  ...["--cpu-strict-draft", "--spec-draft-prio", "--prio-draft", "--spec-draft-poll", "--poll-draft"],
  ...["--spec-draft-cpu-mask-batch", "-Cbd", "--cpu-mask-batch-draft", "--spec-draft-cpu-range-batch"],
  ...["-Crbd", "--cpu-range-batch-draft", "--spec-draft-cpu-strict-batch", "--cpu-strict-batch-draft"],
  ...["--spec-draft-prio-batch", "--prio-batch-draft", "--spec-draft-poll-batch", "--poll-batch-draft"],
  ...["--host", "--port", "--path", "--api-prefix", "--cors-origins", "--cors-methods"],
  ...["--cors-headers", "--api-key", "--api-key-file", "--ssl-key-file", "--ssl-cert-file"],
  ...["-to", "--timeout", "--sse-ping-interval", "--threads-http", "--sleep-idle-seconds"],
  ...["-a", "--alias", "--tags", "-hft", "--hf-token", "--ui-config", "--webui-config"],
  ...["--ui-config-file", "--webui-config-file", "--log-file", "--log-colors", "-lv"],
  ...["--verbosity", "--log-verbosity", "--log-prompts-dir"],
];
const BARE = [
  ...["--reuse-port", "--cors-credentials", "--no-cors-credentials", "--metrics", "--props"],
  ...["--slots", "--no-slots", "--ui", "--webui", "--no-ui", "--no-webui", "--ui-mcp-proxy"],
  ...["--webui-mcp-proxy", "--no-ui-mcp-proxy", "--no-webui-mcp-proxy", "--offline", "--perf"],
  ...["--no-perf", "--log-disable", "-v", "--verbose", "--log-verbose", "--log-prefix"],
  ...["--no-log-prefix", "--log-timestamps", "--no-log-timestamps"],
];
const FLAGS = { valued: new Set(VALUED), bare: new Set(BARE) };

/** `args` less the flags (and their values) that cannot change a saved state's validity. */
export function kvArgs(args: readonly string[]): string[] {
  return argsWithout(args, FLAGS);
}
