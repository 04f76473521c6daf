import { z } from "zod";
import { KV_CACHE_TYPE_NAMES } from "./kv-cache-types.ts";
import { RPC_WORKER_FAILURES } from "./rpc-workers.ts";

/**
 * `plan`: its params, and its result, the plan report. A param not listed is refused, as the
 * other methods that choose what is done refuse theirs (docs/protocol.md "Errors"): a misspelled
 * `model` planned the configured model without a word.
 */
export const PlanParamsSchema = z.strictObject({
  /**
   * Judge this model instead of model.path: a GGUF path (relative to the config's folder) or
   * `hf:org/name[:QUANT|:file.gguf]`, read from the hub's header when not in the cache.
   */
  model: z.string().min(1).optional(),
});

/**
 * The plan report (the `plan` method's result and `local-ai plan --json`) as one strict schema:
 * the TypeScript types below are inferred from it, so the JSON Schema, the client's types and
 * the planner cannot drift apart. Strict objects: a field added to the plan must be added here.
 * Byte counts are plain numbers (unified-memory budgets and quantized KV sizes need not be whole).
 */

const bytes = z.number().nonnegative();
const count = z.number().int().nonnegative();

// ---- hardware --------------------------------------------------------------------------------

export const GpuVendorSchema = z.enum(["nvidia", "amd", "apple", "intel", "other"]);
export type GpuVendor = z.infer<typeof GpuVendorSchema>;

/** The llama-server backend that drives the GPU (its device names: CUDA0, ROCm0, MTL0, Vulkan0…). */
export const GpuBackendSchema = z.enum([
  "cuda",
  "rocm",
  "metal",
  "vulkan",
  "sycl",
  "opencl",
  "musa",
  "cann",
  "other",
]);
export type GpuBackend = z.infer<typeof GpuBackendSchema>;

export const GpuInfoSchema = z.strictObject({
  index: count,
  vendor: GpuVendorSchema,
  name: z.string(),
  backend: GpuBackendSchema,
  total_bytes: bytes,
  free_bytes: bytes,
  /** The GPU draws on system RAM (Apple Silicon; an NVIDIA GB10, whose nvidia-smi reports no memory). */
  unified: z.boolean(),
  driver: z.string().nullable(),
  compute_capability: z.string().nullable(),
  /** llama-server's name for it (`--list-devices`); absent when the binary was not asked. */
  device: z.string().optional(),
});
export type GpuInfo = z.infer<typeof GpuInfoSchema>;

export const ProbeStatusSchema = z.enum(["ok", "absent", "timeout", "error"]);
export type ProbeStatus = z.infer<typeof ProbeStatusSchema>;

export const ProbeReportSchema = z.strictObject({
  id: z.string(),
  status: ProbeStatusSchema,
  message: z.string(),
  ms: z.number().nonnegative(),
});
export type ProbeReport = z.infer<typeof ProbeReportSchema>;

export const HardwareSnapshotSchema = z.strictObject({
  os: z.string(),
  arch: z.string(),
  cpu: z.strictObject({
    model: z.string().nullable(),
    logical: z.number().int().positive(),
    physical: count.nullable(),
    flags: z.array(z.string()),
  }),
  ram: z.strictObject({ total_bytes: bytes, available_bytes: bytes.nullable() }),
  gpus: z.array(GpuInfoSchema),
  /** GPUs a vendor tool found that llama-server will not use, and why (docs/plan.md "Which GPUs"). */
  gpus_unused: z.array(z.string()).optional(),
  /**
   * Devices llama-server lists that the plan leaves out (no vendor tool vouches for them while one
   * vouches for another GPU): a plan with layers on a GPU then names its own with `--device`.
   */
  devices_left_out: z.array(z.string()).optional(),
  probes: z.array(ProbeReportSchema),
});
export type HardwareSnapshot = z.infer<typeof HardwareSnapshotSchema>;

// ---- the model as a host sees it ----------------------------------------------------------------

export const ModelSummarySchema = z.strictObject({
  path: z.string(),
  /** Every shard, the first one first. */
  files: z.array(z.string()),
  gguf_version: z.number().int().positive(),
  size_bytes: bytes,
  architecture: z.string(),
  known_architecture: z.boolean(),
  name: z.string().nullable(),
  /** The weight type holding most of the bytes (Q4_K, F16…). */
  file_type: z.string(),
  parameters: count,
  layers: count,
  context_train: z.number().int().positive(),
  embedding: count,
  heads: count,
  kv_heads: count,
  vocab: count,
  sliding_window: count.nullable(),
  mla: z.boolean(),
  experts: z.strictObject({ count: count, used: count }).nullable(),
});
export type ModelSummary = z.infer<typeof ModelSummarySchema>;

// ---- the plan --------------------------------------------------------------------------------

/** Bytes one device would hold, by kind. */
export const DeviceUsageSchema = z.strictObject({
  weights: bytes,
  kv_cache: bytes,
  compute: bytes,
  output: bytes,
  /**
   * llama-server's RAM prompt cache (`--cache-ram`): prompts that left their slot, kept in host
   * memory (on `cpu`; 0 elsewhere). Counted in `total`.
   */
  cache_ram: bytes,
  /** The vision projector's weights and its encoder's compute buffer, on the device that holds it. Counted in `total`. */
  projector: bytes,
  /** Repeating layers held on this device. */
  layers: count,
  total: bytes,
});
export type DeviceUsage = z.infer<typeof DeviceUsageSchema>;

export const DevicePlanSchema = z.strictObject({
  /**
   * `cpu`; `gpu<N>` with N the GPU's place in the hardware snapshot; `rpc<N>` for a device of
   * an RPC worker, N as llama-server numbers them (`RPC<N>`, in `--rpc` order).
   */
  id: z.string().regex(/^(cpu|gpu\d+|rpc\d+)$/),
  kind: z.enum(["cpu", "gpu", "rpc"]),
  name: z.string(),
  /** An RPC device's worker (`host:port`); absent on this machine's devices. */
  endpoint: z.string().optional(),
  unified: z.boolean(),
  total_bytes: bytes,
  available_bytes: bytes,
  /** Kept free for the OS, the driver and other programs. */
  margin_bytes: bytes,
  budget_bytes: bytes,
  usage: DeviceUsageSchema,
  /** The budget left once the plan's usage is taken. */
  free_after_bytes: z.number(),
});
export type DevicePlan = z.infer<typeof DevicePlanSchema>;

/** Why a configured RPC worker is not a device of the plan. */
export const WORKER_LEFT_OUT = [
  ...RPC_WORKER_FAILURES,
  /** It answered, but has no memory to spend once the margin is kept free. */
  "no_memory",
  /** Another entry of llama.rpc reaches the same worker (src/rpc/same-worker.ts). */
  "same_worker",
  /** Its devices would make more than the 15 llama-server's --tensor-split takes. */
  "too_many_devices",
  /** Not asked (a plan made without querying the workers). */
  "unchecked",
] as const;

/** A configured RPC worker (`llama.rpc`) and what the plan made of it. */
export const WorkerPlanSchema = z.strictObject({
  endpoint: z.string(),
  /** `used`: passed to `--rpc`, its devices are in `devices`; `left_out`: not, see `reason`. */
  status: z.enum(["used", "left_out"]),
  /** What it offers, or why it was left out. */
  reason: z.string(),
  left_out: z.enum(WORKER_LEFT_OUT).nullable(),
  /** Its RPC protocol version, once it answered. */
  version: z.string().nullable(),
  /** The plan's ids of its devices (`rpc<N>`). */
  devices: z.array(z.string()),
  /** `memory_bytes` from the config: the budget used instead of what it reports. */
  memory_bytes: bytes.nullable(),
});
export type WorkerPlan = z.infer<typeof WorkerPlanSchema>;

/** Every decision the planner reports, in argv order. */
export const DECISION_NAMES = [
  "slots",
  "context",
  "embedding",
  "gpu_layers",
  "devices",
  "rpc",
  "tensor_split",
  "threads",
  "flash_attn",
  "cache_types",
  "mmap",
  "mmproj",
  "image_tokens",
  "jinja",
  "idle_sleep",
  "cache_ram",
  "slot_save",
  "extra_args",
] as const;

export const DecisionSchema = z.strictObject({
  name: z.enum(DECISION_NAMES),
  value: z.union([z.string(), z.number(), z.boolean(), z.null()]),
  /** `config` when a config key chose it (or forced it), `auto` when the planner did. */
  source: z.enum(["auto", "config"]),
  /** The llama-server flags this decision produces. */
  flags: z.array(z.string()),
  reason: z.string(),
});
export type Decision = z.infer<typeof DecisionSchema>;

/**
 * The chat template llama-server will apply, and whether it lets the model think
 * (docs/agent.md#thinking-and-structured-output).
 */
export const ChatTemplateReportSchema = z.strictObject({
  /**
   * `model`: the GGUF's own (`tokenizer.chat_template`); `file` or `inline`:
   * `--chat-template-file` or `--chat-template` in llama.extra_args; `none`: the model has none.
   */
  source: z.enum(["model", "file", "inline", "none"]),
  /** Whether it opens a think block (reasoning models); null when its text could not be read. */
  thinking: z.boolean().nullable(),
  reason: z.string(),
});
export type ChatTemplateReport = z.infer<typeof ChatTemplateReportSchema>;

export const FlashAttnSchema = z.enum(["on", "off", "auto"]);

/** The poolings an embedding model is run with (`/v1/embeddings` refuses none: recording 117). */
export const EMBEDDING_POOLINGS = ["mean", "cls", "last"] as const;

/**
 * How a model of kind embedding runs (docs/plan.md "Embedding models"): `--embeddings`, its
 * pooling, and inputs of up to `batch` tokens (`-b` = `-ub`); null for a chat model.
 */
export const EmbeddingPlanSchema = z.strictObject({
  pooling: z.enum(EMBEDDING_POOLINGS),
  /** The longest input in tokens: llama-server refuses a longer one (recording 114). */
  batch: z.number().int().positive(),
  /** A decoder used as an embedder attends causally and keeps a KV cache; an encoder keeps none. */
  causal: z.boolean(),
});
export type EmbeddingPlan = z.infer<typeof EmbeddingPlanSchema>;
export const KvCacheTypeSchema = z.enum(KV_CACHE_TYPE_NAMES);

/**
 * The vision projector a chat model launches with (`--mmproj`; docs/plan.md "The projector"):
 * what it is, how it was chosen, what it holds and where, and what one image may take.
 */
export const ProjectorPlanSchema = z.strictObject({
  path: z.string(),
  /** `config`: `mmproj` named it; `auto`: found in the model's hub snapshot or beside it. */
  source: z.enum(["config", "auto"]),
  /** `clip.projector_type` (`mlp`, `pixtral`…). */
  projector_type: z.string(),
  file_type: z.string(),
  /** Its projection width, equal to `model_width` (else the plan is a `model_plan_error`). */
  width: count,
  model_width: count,
  weights_bytes: bytes,
  /** The encoder's compute buffer, for the largest image the projector takes. */
  compute_bytes: bytes,
  /** The device id (`cpu`, `gpu<N>`) whose usage counts it. */
  device: z.string(),
  /** `fixed`: every image costs the same; `by_size`: tokens grow with the image. */
  image_tokens: z.enum(["fixed", "by_size"]),
  /** The most tokens one image may take in the prompt; null where the projector's type does not say. */
  image_tokens_max: count.nullable(),
  /** `--image-max-tokens`, the cap passed; null when none is (a fixed projector, or its own limit is within a quarter). */
  image_max_tokens: z.number().int().positive().nullable(),
});
export type ProjectorPlan = z.infer<typeof ProjectorPlanSchema>;

export const PlanSchema = z.strictObject({
  model_path: z.string(),
  slots: z.number().int().positive(),
  context_per_slot: z.number().int().positive(),
  /** What `-c` says: the per-slot context times the slots. */
  context_total: z.number().int().positive(),
  gpu_layers: count,
  /** Every layer and the output head offloaded (`-ngl` n_layer + 1): to GPUs and RPC workers. */
  gpu_layers_all: z.boolean(),
  threads: z.number().int().positive(),
  flash_attn: FlashAttnSchema,
  cache_type_k: KvCacheTypeSchema,
  cache_type_v: KvCacheTypeSchema,
  mmap: z.boolean(),
  mlock: z.boolean(),
  max_tokens: z.number().int().positive().nullable(),
  devices: z.array(DevicePlanSchema),
  /** Every worker of `llama.rpc`, in config order (empty when none is configured). */
  workers: z.array(WorkerPlanSchema),
  decisions: z.array(DecisionSchema),
  /** llama-server's arguments, without --host, --port and the API key (the supervisor adds them). */
  argv: z.array(z.string()),
  chat_template: ChatTemplateReportSchema,
  /** Set for a model of kind embedding. */
  embedding: EmbeddingPlanSchema.nullable(),
  /** Whether the model reads images: a projector is launched with it. */
  vision: z.boolean(),
  projector: ProjectorPlanSchema.nullable(),
  warnings: z.array(z.string()),
});
export type Plan = z.infer<typeof PlanSchema>;

/** The `plan` method's result and the CLI's `--json`: the same object. */
export const PlanReportSchema = z.strictObject({
  /** Always true: a plan that does not fit is a `model_plan_error`, not a report. */
  fits: z.literal(true),
  model: ModelSummarySchema,
  hardware: HardwareSnapshotSchema,
  plan: PlanSchema,
});
export type PlanReport = z.infer<typeof PlanReportSchema>;
