import { existsSync } from "node:fs";
import type { ErrorCode } from "../protocol/errors.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import { escapedCut } from "../util/terminal-text.ts";

/**
 * Why llama-server exited during start-up, read from its own log lines (recorded in
 * test/fixtures/llama-server/transcripts 70-73, 82-83). Pure: the supervisor passes the log tail.
 */
export interface StartFailure {
  code: ErrorCode;
  /** One sentence for the host; the log tail travels separately in `data`. */
  message: string;
  /** The port was taken: choose another and try again. */
  retryPort: boolean;
  /** It ran out of memory allocating the model, its cache or its buffers (launcher.ts plans again keeping more of the GPU free). */
  outOfMemory?: boolean;
}

interface Rule {
  pattern: RegExp;
  code: ErrorCode;
  message: (m: RegExpMatchArray) => string;
  retryPort?: boolean;
  outOfMemory?: boolean;
}

// Order matters: the most specific cause first (a missing file also logs "failed to load model").
const RULES: Rule[] = [
  {
    pattern: /couldn't bind HTTP server socket, hostname: (\S+), port: (\d+)/,
    code: "internal_error",
    message: (m) => `llama-server could not bind ${m[1]}:${m[2]} (port in use)`,
    retryPort: true,
  },
  {
    pattern: /failed to open GGUF file '([^']*)' \(([^)]*)\)/,
    code: "model_missing",
    message: (m) => `model file cannot be opened: ${m[1]} (${m[2]})`,
  },
  {
    pattern: /invalid magic characters/,
    code: "model_missing",
    message: () => "model file is not a GGUF file (invalid magic)",
  },
  {
    pattern: /failed to read magic/,
    code: "model_missing",
    message: () => "model file is not a GGUF file (empty, a folder, or unreadable)",
  },
  {
    pattern: /data is not within the file bounds|model is corrupted or incomplete/,
    code: "model_missing",
    message: () => "model file is truncated or corrupt (tensor data is not within the file bounds)",
  },
  // RPC workers (transcripts 82, 83; newer builds abort where b10587 skipped): before the
  // out-of-memory rule, since a worker missing at start-up is what leaves memory short.
  {
    pattern: /RPC handshake failed for (\S+)/,
    code: "internal_error",
    message: (m) =>
      `RPC worker ${m[1]} speaks another RPC protocol version than this llama-server (run ggml-rpc-server from the same llama.cpp build); the next start plans without it`,
  },
  {
    pattern: /RPC server version mismatch: (\d+\.\d+\.\d+)/,
    code: "internal_error",
    message: (m) =>
      `an RPC worker speaks RPC protocol v${m[1]}, which this llama-server refuses (run ggml-rpc-server from the same llama.cpp build)`,
  },
  {
    pattern: /Failed to connect to ([^\s:,]+:\d+)\s*$/,
    code: "internal_error",
    message: (m) =>
      `llama-server could not connect to RPC worker ${m[1]} at start-up (it stopped answering after the check); the next start plans without it`,
  },
  {
    pattern: /Remote RPC server crashed or returned malformed response/,
    code: "internal_error",
    message: () =>
      "an RPC worker stopped answering while llama-server loaded the model (Remote RPC server crashed or returned malformed response); the next start plans without any that is gone",
  },
  {
    // A GPU's own allocation (ggml-cuda and its HIP build: `cudaMalloc failed`; the model's
    // `unable to allocate CUDA0 buffer`; ggml-vulkan's OutOfDeviceMemory; ggml-metal's buffer).
    // Not a `CUDA_Host` (`Vulkan_Host`…) buffer: pinned host RAM, the CPU's layers without mmap,
    // whose failure is the RAM's (fewer layers on the GPU would need more of it).
    pattern:
      /cudaMalloc failed|unable to allocate (CUDA|ROCm|Vulkan|MTL|Metal|SYCL|MUSA|CANN)(?!\w*_Host)\w* buffer|ErrorOutOfDeviceMemory|OutOfDeviceMemory|ggml_metal\w*: error: failed to allocate buffer/i,
    code: "model_plan_error",
    message: () =>
      "llama-server ran out of GPU memory loading the model; try a smaller context or fewer GPU layers",
    outOfMemory: true,
  },
  {
    pattern:
      /out of memory|failed to allocate|unable to allocate|not enough memory|failed to create context with model|insufficient memory/i,
    code: "model_plan_error",
    message: () =>
      "llama-server ran out of memory loading the model; try a smaller context or fewer GPU layers",
  },
  {
    // spawnServer appends `--host 127.0.0.1 --port N` after extra_args: a flag left last there
    // without its value (`--alias`) takes `--host` as it, and the address is then read as a flag.
    pattern: /error: invalid argument: 127\.0\.0\.1\s*$/,
    // Not config_invalid: that code's data names the file and line, which the exit cannot.
    code: "internal_error",
    message: () =>
      "llama.extra_args (or a models entry's extra_args) ends with a flag that takes a value and has none: llama-server read the core's own --host as its value",
  },
  {
    pattern: /error: invalid argument: (\S+)/,
    code: "internal_error",
    message: (m) => `llama-server rejected the flag ${m[1]} (is this build too old for the plan?)`,
  },
  {
    pattern: /error while handling argument "([^"]+)"/,
    code: "internal_error",
    message: (m) => `llama-server rejected the value of ${m[1]}`,
  },
  {
    pattern: /unknown model architecture: '([^']*)'/,
    code: "internal_error",
    message: (m) => `this llama-server does not support the model architecture '${m[1]}'`,
  },
];

/** Classifies an exit during start-up from its log tail and exit status. */
export function classifyStartExit(
  logTail: readonly string[],
  exitCode: number | null,
  signal: string | null,
): StartFailure {
  for (const rule of RULES) {
    for (const line of logTail) {
      const m = line.match(rule.pattern);
      if (m)
        return {
          code: rule.code,
          message: rule.message(m),
          retryPort: rule.retryPort ?? false,
          outOfMemory: rule.outOfMemory,
        };
    }
  }
  const how = signal ? `was killed by ${signal}` : `exited with code ${exitCode}`;
  const lastError = [...logTail]
    .reverse()
    .find((l) => /\bE\s|error/i.test(l))
    ?.trim();
  return {
    code: "internal_error",
    // Cut between characters (the host's parser refuses a line with half an emoji, a path's) and
    // escapes (llama-log-text.ts).
    message: `llama-server ${how} during start-up${lastError ? `: ${escapedCut(lastError, 300)}` : ""}`,
    retryPort: false,
  };
}

/**
 * A model file gone between the plan and the spawn, told by the file itself: llama-server logs
 * through a thread of its own, and an exit on a busy machine can come before its last lines
 * ("failed to open GGUF file"…) are written (seen under load: 1 start in 20 lost them). Its stat
 * is asked off the loop first: on a dead network mount a synchronous one held the whole core.
 */
export async function modelGone(
  argv: readonly string[],
  ask: DriveAnswers = drives,
): Promise<StartFailure | undefined> {
  const i = argv.indexOf("-m");
  const path = i >= 0 ? argv[i + 1] : undefined;
  if (path === undefined) return undefined;
  const answered = await ask.answers(path);
  // Refused unasked (every lane held by other paths' stats): nothing is known of this file.
  if (!answered && !ask.asking(path)) return undefined;
  if (answered && existsSync(path)) return undefined;
  const why = answered
    ? "not found, or out of this user's reach"
    : `its drive did not answer within ${ask.waitMs / 1000} s: a network drive offline?`;
  return {
    code: "model_missing",
    message: `model file cannot be opened: ${path} (${why})`,
    retryPort: false,
  };
}
