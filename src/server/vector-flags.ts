import { argsWithout } from "../plan/argv.ts";

/**
 * llama-server's flags (common/arg.cpp, b10587) that change no embedding vector: how many threads
 * and on which cores, where the weights and the cache are held, the HTTP server, the log. Each
 * with whether it takes a value. `--threads 4` added to `llama.extra_args` changed memory's
 * embedding fingerprint, and every row of memory was embedded again. Placement (`-ngl`,
 * `--device`, `-fa`…) runs the same weights and the same math elsewhere, the vectors equal to
 * rounding; `-c`, `-b`, `-ub` decide which inputs fit, not what a fitting one becomes. Any flag
 * not named here counts (`--pooling`, `--attention`, `--rope-*`, `--lora`, `--control-vector`,
 * `--override-kv`, `-ctk`, `--embd-normalize`…, and one a later build adds): a flag missed here
 * costs a re-embed, a flag wrongly left out would mix two models' vectors.
 */
const VALUED = [
  ...["-t", "--threads", "-tb", "--threads-batch", "-C", "--cpu-mask", "-Cr", "--cpu-range"],
  ...["--cpu-strict", "--prio", "--poll", "-Cb", "--cpu-mask-batch", "-Crb", "--cpu-range-batch"],
  ...["--cpu-strict-batch", "--prio-batch", "--poll-batch", "--numa", "-lm", "--load-mode"],
  ...["-c", "--ctx-size", "-b", "--batch-size", "-ub", "--ubatch-size", "-np", "--parallel"],
  ...["-cram", "--cache-ram", "--cache-reuse", "--sleep-idle-seconds", "-fa", "--flash-attn"],
  ...["-ngl", "--gpu-layers", "--n-gpu-layers", "-dev", "--device", "-ts", "--tensor-split"],
  ...["-sm", "--split-mode", "-mg", "--main-gpu", "--rpc", "-ot", "--override-tensor", "-ncmoe"],
  ...["--n-cpu-moe", "-fit", "--fit", "-fitp", "--fit-print", "-fitt", "--fit-target"],
  ...["-fitc", "--fit-ctx", "--host", "--port", "--path", "--api-prefix", "--cors-origins"],
  ...["--cors-methods", "--cors-headers", "--api-key", "--api-key-file", "--ssl-key-file"],
  ...["--ssl-cert-file", "-to", "--timeout", "--sse-ping-interval", "--threads-http"],
  ...["--slot-save-path", "-a", "--alias", "--tags", "-hft", "--hf-token", "--log-file"],
  ...["--log-colors", "-lv", "--verbosity", "--log-verbosity", "-co", "--color"],
];
const BARE = [
  ...["--mlock", "--mmap", "--no-mmap", "-dio", "--direct-io", "-ndio", "--no-direct-io"],
  ...["-cb", "--cont-batching", "-nocb", "--no-cont-batching", "-kvo", "--kv-offload", "-nkvo"],
  ...["--no-kv-offload", "--repack", "-nr", "--no-repack", "--no-host", "--op-offload"],
  ...["--no-op-offload", "-cmoe", "--cpu-moe", "--warmup", "--no-warmup", "--perf", "--no-perf"],
  ...["--cache-prompt", "--no-cache-prompt", "--metrics", "--props", "--slots", "--no-slots"],
  ...["--reuse-port", "--offline", "--log-disable", "-v", "--verbose", "--log-verbose"],
  ...["--log-prefix", "--no-log-prefix", "--log-timestamps", "--no-log-timestamps"],
  ...["--ui", "--webui", "--no-ui", "--no-webui", "--cors-credentials", "--no-cors-credentials"],
];
const FLAGS = { valued: new Set(VALUED), bare: new Set(BARE) };

/** `args` less the flags (and their values) that change no vector: those a fingerprint keys. */
export function vectorArgs(args: readonly string[]): string[] {
  return argsWithout(args, FLAGS);
}
