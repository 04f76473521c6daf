import { z } from "zod";
import { KV_CACHE_TYPE_NAMES } from "../protocol/kv-cache-types.ts";
import { ThinkSchema } from "../protocol/think.ts";
import { MAX_TIMER_MS } from "../util/timer-limit.ts";
import { noDevicePaths } from "./device-paths.ts";
import { ExtraArgsSchema } from "./extra-args.ts";
import { checkModelNames, DEFAULT_MODEL_NAME, ModelSchema, ModelsSchema } from "./model-schema.ts";
import { noNulCharacters } from "./nul-check.ts";
import { parseEndpoint, shownEntry } from "./rpc-endpoint.ts";

/**
 * The whole of config.yaml. Every section has defaults, so an empty file is a valid config
 * (a host still needs `model.path` before it can chat). Relative paths are resolved against
 * the config file's folder by the loader, not here.
 */

const positiveInt = z.number().int().positive();
const nonNegativeInt = z.number().int().nonnegative();
const auto = z.literal("auto");
/** GGML_MAX_N_THREADS (ggml.h): the most threads ggml's CPU masks know. */
const LLAMA_MAX_THREADS = 512;

const TIMER_MAX_S = Math.floor(MAX_TIMER_MS / 1000);
/** A duration in seconds, bounded so that it stays a valid timer once turned into ms. */
const seconds = z
  .number()
  .max(TIMER_MAX_S, `at most ${TIMER_MAX_S} s (about 24 days, the longest a timer can wait)`);
/** A duration in ms, bounded likewise. */
const millis = nonNegativeInt.max(
  MAX_TIMER_MS,
  `at most ${MAX_TIMER_MS} ms (about 24 days, the longest a timer can wait)`,
);

/**
 * A section that may be written with all of its keys commented out: YAML reads `app:` alone as
 * null, which means "all defaults" just as leaving the section out does.
 */
function section<T extends z.ZodType>(schema: T) {
  return z.preprocess((value) => (value === null ? undefined : value), schema);
}

export const AppSchema = z
  .object({
    /** Sessions, checkpoints, memory index, logs, the child pid record. */
    data_dir: z.string().min(1).default("./data"),
    /** Re-prompts for salvageable tool-call parse failures (and replies llama-server could not parse) before loop_abort. */
    max_parse_errors: nonNegativeInt.default(2),
    /** LLM steps per turn before loop_abort. */
    max_steps: positiveInt.default(8),
    /** Chats run at once; "auto" follows the plan's llama-server slots. */
    max_parallel_chats: z.union([auto, positiveInt]).default("auto"),
    /** Images one chat may carry (docs/protocol.md#images). */
    max_images: positiveInt.max(64).default(8),
    /** An image's width × height, read from its header before anything decodes it (a bomb is refused). */
    max_image_pixels: positiveInt.default(50_000_000),
    /**
     * Text that streams within this many ms of the last `llm_chunk` (`llm_reasoning`) waits and
     * goes in the next one; 0: an event per token (docs/protocol.md#chat, "Joined pieces").
     */
    stream_gather_ms: nonNegativeInt.max(100).default(5),
  })
  .prefault({});

/**
 * `llama.rpc`: llama.cpp RPC workers (`ggml-rpc-server` on other machines), as `"host:port"` or
 * `{endpoint: "host:port", memory_bytes: N}` where N is a budget in bytes that replaces what the
 * worker reports (docs/distributed.md). Each entry is checked as llama-server will read it, and
 * listed once; every problem names its entry (`llama.rpc.<i>`). The output is always the object
 * form.
 */
export interface RpcWorkerConfig {
  /** `host:port`, the host in lower case: what `--rpc` gets. */
  endpoint: string;
  host: string;
  port: number;
  /** A budget replacing the free memory the worker reports (no margin is taken from it). */
  memory_bytes: number | null;
}

const RPC_ENTRY = `"host:port" or {endpoint: "host:port", memory_bytes: N}`;

function rpcEntry(
  entry: unknown,
): { raw: string; memory: number | null } | { path: (string | number)[]; why: string } {
  if (typeof entry === "string") return { raw: entry, memory: null };
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    const got =
      entry === null ? "null" : Array.isArray(entry) ? "a list" : `${typeof entry} ${JSON.stringify(entry)}`;
    return { path: [], why: `expected ${RPC_ENTRY}, got ${got}` };
  }
  const fields = entry as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((k) => k !== "endpoint" && k !== "memory_bytes");
  if (unknown.length > 0)
    return { path: [], why: `unknown key ${unknown.map((k) => `'${k}'`).join(", ")}: expected ${RPC_ENTRY}` };
  if (typeof fields.endpoint !== "string")
    return { path: ["endpoint"], why: `missing or not a string: expected "host:port"` };
  const memory = fields.memory_bytes ?? null;
  if (memory !== null && !(Number.isSafeInteger(memory) && (memory as number) > 0)) {
    return {
      path: ["memory_bytes"],
      // String(), not JSON: `.inf` is Infinity, which JSON writes as null.
      why: `expected a whole number of bytes above 0, got ${typeof memory === "number" ? memory : JSON.stringify(memory)}`,
    };
  }
  return { raw: fields.endpoint, memory: memory as number | null };
}

/**
 * The most workers `llama.rpc` may list: llama-server takes 15 devices in all, and every worker
 * is asked at once by each plan, doctor and start (a socket each): thousands of entries (a 1 MiB
 * config holds 43,000) went past the open-file limit and made doctor's answer tens of MB.
 */
export const MAX_RPC_WORKERS = 64;

export const RpcWorkersSchema = z.array(z.unknown()).transform((entries, ctx): RpcWorkerConfig[] => {
  if (entries.length > MAX_RPC_WORKERS) {
    ctx.addIssue({
      code: "custom",
      message: `${entries.length} workers listed, at most ${MAX_RPC_WORKERS} (llama-server uses 15 devices in all): list the machines you mean to use`,
    });
    return [];
  }
  const out: RpcWorkerConfig[] = [];
  const seen = new Map<string, number>();
  entries.forEach((entry, i) => {
    const e = rpcEntry(entry);
    if ("why" in e) {
      ctx.addIssue({ code: "custom", path: [i, ...e.path], message: e.why });
      return;
    }
    const parsed = parseEndpoint(e.raw);
    if (!parsed.ok) {
      ctx.addIssue({
        code: "custom",
        path: [i],
        message: `'${shownEntry(e.raw)}' is not host:port: ${parsed.why}`,
      });
      return;
    }
    const first = seen.get(parsed.endpoint);
    if (first !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: [i],
        message: `'${e.raw}' is listed twice (entries ${first} and ${i}); list each worker once`,
      });
      return;
    }
    seen.set(parsed.endpoint, i);
    out.push({ endpoint: parsed.endpoint, host: parsed.host, port: parsed.port, memory_bytes: e.memory });
  });
  return out;
});

export const LlamaSchema = z
  .object({
    /** llama-server path; null looks next to the executable, then on PATH. */
    binary: z.string().min(1).nullable().default(null),
    startup_timeout_s: seconds.positive().default(120),
    /** Passed through to llama-server after the planned flags. */
    extra_args: ExtraArgsSchema,
    /** Grace period between the polite signal and the kill. */
    stop_grace_s: seconds.nonnegative().default(3),
    /** Restarts allowed after crashes within restart_window_s before chats fail without retrying. */
    max_restarts: nonNegativeInt.default(3),
    /** The window max_restarts counts in: the budget recovers as restarts age out of it. */
    restart_window_s: seconds.positive().int().default(300),
    restart_backoff_ms: millis.default(500),
    /** A request that makes no progress for this long marks the server wedged. */
    request_timeout_s: seconds.positive().default(120),
    /**
     * Seconds without requests after which llama-server unloads the model (it reloads on the
     * next request by itself): `--sleep-idle-seconds`. 0 never unloads. Whole seconds, as
     * llama-server reads them, bounded like every timer.
     */
    idle_sleep_s: seconds.int().nonnegative().default(300),
    /**
     * With several models (docs/models.md, "Several models"): how long a load waits for memory
     * that loaded models hold before it fails, and how long a model may sit unused before its
     * llama-server stops (0: never).
     */
    load_wait_s: seconds.positive().default(120),
    idle_unload_s: seconds.int().nonnegative().default(0),
    /** Parallel slots; "auto" lets the plan decide. */
    parallel: z.union([auto, positiveInt]).default("auto"),
    /**
     * ggml's most (GGML_MAX_N_THREADS in ggml.h): llama-server passes any count on, and ggml
     * starts a thread per count (GGML_ASSERT on one the system refuses: the server aborts).
     */
    threads: z
      .union([auto, positiveInt.max(LLAMA_MAX_THREADS, `at most ${LLAMA_MAX_THREADS} (ggml's most threads)`)])
      .default("auto"),
    flash_attn: z.enum(["auto", "on", "off"]).default("auto"),
    cache_type_k: z.enum(KV_CACHE_TYPE_NAMES).default("f16"),
    cache_type_v: z.enum(KV_CACHE_TYPE_NAMES).default("f16"),
    mmap: z.boolean().default(true),
    mlock: z.boolean().default(false),
    /** Rotating log of llama-server's output under data_dir/logs. */
    log_max_bytes: positiveInt.default(5 * 1024 * 1024),
    /**
     * Each rotation renames every file down the line, one existence check per number on the
     * event loop: 10,000,000 took 39 s a rotation, and with a small log_max_bytes rotations come
     * every few lines.
     */
    log_files: positiveInt.max(100, "at most 100 (each rotation renames every file)").default(3),
    /** llama.cpp RPC workers whose memory the plan may use (see RpcWorkersSchema). */
    rpc: RpcWorkersSchema.default([]),
    /**
     * Disk a conversation's saved KV state may take under data_dir/kv (docs/agent.md#prompt-reuse),
     * all sessions together; the least recently used go first. 0 saves nothing to disk.
     */
    kv_disk_bytes: nonNegativeInt.default(4 * 1024 ** 3),
  })
  .prefault({});

export const HardwareSchema = z
  .object({
    ram_bytes: positiveInt.nullable().default(null),
    vram_bytes: nonNegativeInt.nullable().default(null),
  })
  .prefault({});

export const AgentSchema = z.object({
  name: z.string().min(1),
  /** The model this agent chats with: `default` (the model section) or a `models` entry's name. */
  model: z.string().min(1).default(DEFAULT_MODEL_NAME),
  system_prompt: z.string().default("You are a helpful assistant."),
  /** MCP tools this agent may use, as `server.tool` or `server.*`. */
  tools: z.array(z.string().regex(/^[^.\s]+\.[^\s]+$/, "expected server.tool or server.*")).default([]),
  /** Overrides app.max_steps for this agent. */
  max_steps: positiveInt.optional(),
  temperature: z.number().min(0).max(5).optional(),
  top_p: z.number().min(0).max(1).optional(),
  max_tokens: positiveInt.optional(),
  /**
   * Whether and how much a reasoning model thinks (docs/agent.md#thinking-and-structured-output):
   * the chat's `think` when it gives none.
   */
  think: ThinkSchema.optional(),
});

/**
 * An environment variable's name: no environment holds an empty one, or one with `=` (`A=B: x`
 * set A to "B=x") or NUL (spawn threw, and the server did not start, at the first chat).
 */
const envName = z
  .string()
  .regex(/^[^=\0]+$/, "an environment variable's name is not empty and holds no '=' or NUL character");

export const McpServerSchema = z.object({
  name: z
    .string()
    .min(1)
    .regex(/^[A-Za-z0-9_-]+$/, "letters, digits, _ and - only"),
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(envName, z.string()).default({}),
  cwd: z.string().min(1).optional(),
  /** Per tool call. */
  timeout_s: seconds.positive().default(60),
  /** How long the server may take to start and list its tools before the chat runs without them. */
  startup_timeout_s: seconds.positive().default(20),
  /**
   * Tools that run only with the chat's approve_execution: names as the server lists them (the
   * alphabet tool-list.ts offers), or `*` for all. Nothing else: `write_*` matched no tool, and
   * every write tool ran unapproved while the config read as if they needed it.
   */
  requires_approval: z
    .array(
      z
        .string()
        .regex(
          /^(\*|[A-Za-z0-9_-]{1,64})$/,
          "a tool's name as its server lists it, or * for all (no other patterns)",
        ),
    )
    .default([]),
});

export const MemorySchema = z
  .object({
    enabled: z.boolean().default(true),
    top_k: nonNegativeInt.default(4),
    /** Folders of notes or documents indexed beside past turns. */
    folders: z.array(z.string().min(1)).default([]),
    /** A `models` entry of kind embedding, for `embed` when it names none. */
    embedding_model: z.string().min(1).nullable().default(null),
  })
  .prefault({});

export const LoggingSchema = z
  .object({
    level: z.enum(["silent", "fatal", "error", "warn", "info", "debug", "trace"]).default("info"),
  })
  .prefault({});

export const StdioSchema = z
  .object({
    /** Outbound messages held before events are dropped. */
    queue_size: positiveInt.default(1024),
    /** How long shutdown or stdin EOF waits for queued output. */
    drain_timeout_ms: millis.default(2000),
    /**
     * Longest accepted request line; longer ones are answered invalid_request and discarded. At
     * least a KiB: `8` (meant as MiB) refused every request, ping and cancel included.
     */
    max_line_bytes: positiveInt
      .min(1024, "at least 1024 bytes (below it even ping, cancel and initialize are refused)")
      .default(8 * 1024 * 1024),
  })
  .prefault({});

export const DEFAULT_AGENT = { name: "assistant", system_prompt: "You are a helpful assistant.", tools: [] };

export const ConfigSchema = z
  .object({
    app: section(AppSchema),
    llama: section(LlamaSchema),
    model: section(ModelSchema),
    models: section(ModelsSchema),
    hardware: section(HardwareSchema),
    agents: section(
      z
        .array(AgentSchema)
        .min(1)
        // prefault: the default agent is parsed too, so it gets every default (its model).
        .prefault([DEFAULT_AGENT])
        .refine(
          (agents) => new Set(agents.map((a) => a.name)).size === agents.length,
          "agent names must be unique",
        ),
    ),
    mcp_servers: section(
      z
        .array(McpServerSchema)
        .default([])
        .refine((s) => new Set(s.map((x) => x.name)).size === s.length, "MCP server names must be unique"),
    ),
    memory: section(MemorySchema),
    logging: section(LoggingSchema),
    stdio: section(StdioSchema),
  })
  .superRefine(checkModelNames)
  .superRefine(noNulCharacters)
  .superRefine((config, ctx) => noDevicePaths(config, ctx))
  .prefault({});

export type Config = z.infer<typeof ConfigSchema>;
export type AgentConfig = z.infer<typeof AgentSchema>;
export type McpServerConfig = z.infer<typeof McpServerSchema>;

/** A config plus where it came from: relative paths inside are already absolute. */
export interface LoadedConfig {
  config: Config;
  /** Absolute path of the file, or null when built from defaults. */
  file: string | null;
  dir: string;
  warnings: string[];
}
