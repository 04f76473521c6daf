import { z } from "zod";
import { argSecrets } from "../util/arg-secrets.ts";
import { SECRET_FLAGS, URL_FLAGS } from "../util/llama-secret-flags.ts";

/**
 * Whether `arg` is a flag and a credential written as one entry (`- --api-key sk-…` in a block
 * list, `["--api-key sk-…"]`): one of llama-server's secret flags among its words, or a credential in its
 * words as arg-secrets.ts finds them on a command line.
 * llama-server reads it as one unknown flag and exits quoting it whole ("invalid argument:
 * --api-key sk-…", in its log and a failed start's log_tail), and no mask knows its shape: the
 * plan's argv, the log's start line and the child's command line showed the value as written.
 */
function flagWithCredential(arg: string): boolean {
  const words = arg.trim().split(/\s+/);
  const first = words[0] ?? "";
  const eq = first.indexOf("=");
  // A flag alone is its own entry. Its `=` form, llama-server's parser takes none: one the launch
  // does not move (`--api-keys=sk-…`, misspelt) goes to it, shown, and it quotes it whole.
  if (!arg.startsWith("-") || !(/\s/.test(arg) || eq > 0)) return false;
  // `--mcp-servers-json={"s": …}`: one flag and its value, spaces or not, which the launch moves
  // whole to llama-server's environment and the plan shows masked (plan/secret-args.ts); only
  // another flag's credential after it (`--api-key=x -hft hf_…`) is a second argument.
  if (eq > 0 && secretFlag(first.slice(0, eq)))
    return holdsCredential([first.slice(eq + 1), ...words.slice(1)]);
  return holdsCredential(words);
}

/** Whether `words` hold one of llama-server's secret flags or a credential as arg-secrets.ts finds them. */
function holdsCredential(words: readonly string[]): boolean {
  // Any word, not the first alone: llama-server quotes `--jinja -hft hf_…` whole as well.
  return words.some((w) => secretFlag(w.replace(/=.*$/s, ""))) || argSecrets(words).some((s) => s !== "");
}

/** Whether `name` is a flag whose value is a secret, as llama-server reads it: `--hf_token` is `--hf-token`. */
function secretFlag(name: string): boolean {
  const flag = name.startsWith("--") ? name.replaceAll("_", "-") : name;
  return SECRET_FLAGS.has(flag) || URL_FLAGS.has(flag);
}

/**
 * Whether `arg` is `--slot-save-path` as llama-server reads it (`_` as `-`, any `=` value). The
 * core owns that folder (data_dir/kv: docs/agent.md "Prompt reuse"): after the planned flag, it
 * won, and conversations' KV state went where neither llama.kv_disk_bytes nor the erase methods
 * (sessions.delete, users.delete) look, kept for good.
 */
function slotSavePath(arg: string): boolean {
  return /^--slot[-_]save[-_]path(=|$)/s.test(arg);
}

/**
 * Whether `arg` changes how llama-server answers the core itself (`_` as `-`, any `=` value): the
 * core speaks plain HTTP to it on loopback and polls `/health` (docs/supervisor.md).
 * `--api-prefix` moves every route under it (server-http.cpp, `path_prefix + path`): /health
 * answered 404 until the start-up timeout ran out and the start failed as too slow, a config
 * doctor called valid. `--ssl-key-file`/`--ssl-cert-file` make it speak TLS, which the core
 * reads as a port that never answers (or, built without SSL, it exits at start).
 */
function unreachableFlag(arg: string): boolean {
  return /^--(api[-_]prefix|ssl[-_]key[-_]file|ssl[-_]cert[-_]file)(=|$)/s.test(arg);
}

/**
 * `llama.extra_args` and a `models` entry's: strings passed to llama-server after the planned
 * flags, a flag and its credential as two entries (the value never quoted by the refusal), no
 * `--slot-save-path` (the core's own), nothing that moves or encrypts what the core talks to.
 */
export const ExtraArgsSchema = z
  .array(
    z
      .string()
      .refine(
        (arg) => !flagWithCredential(arg),
        "a flag and its value written as one entry: write them as two entries ([--api-key, …]), as llama-server reads them",
      )
      .refine(
        (arg) => !slotSavePath(arg),
        "--slot-save-path is the core's: conversations' KV state is kept under app.data_dir (kv), where llama.kv_disk_bytes bounds it and the erase methods reach it",
      )
      .refine(
        (arg) => !unreachableFlag(arg),
        "--api-prefix, --ssl-key-file and --ssl-cert-file are the core's to leave out: the core talks to llama-server in plain HTTP at its own routes (/health, /v1/chat/completions) on 127.0.0.1",
      ),
  )
  .default([]);
