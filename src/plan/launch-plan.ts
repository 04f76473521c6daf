import type { Config } from "../config/schema.ts";
import type { EmbeddingPlan } from "../protocol/plan.ts";
import type { KvCacheType } from "./ggml-types.ts";

/**
 * What the supervisor launches: every decision of the plan as a typed field. argv is rendered
 * from it once, at spawn (`renderArgv` in argv.ts), in the dialect the binary speaks; the
 * plan report's argv is the same rendering, so what `plan` shows is what runs. --host, --port
 * and the key are the supervisor's. Nothing reads a decision back out of argv.
 */
export interface LaunchPlan {
  /** `-m`: the file (an `hf:` path already resolved). */
  model_path: string;
  /** The GGUF's `general.name` and its size (all files of a split model), for status and load progress. */
  model_name: string | null;
  model_bytes: number;
  /** `-np`: parallel slots, the chats that run at once. */
  slots: number;
  /** Tokens per slot; `-c` is it times the slots. */
  context_per_slot: number;
  /** `model.max_tokens`, the reply cap a chat asks for (a request field, not a flag). */
  max_tokens: number | null;
  /** `-ngl`: layers offloaded to the GPUs and RPC devices (n_layer + 1 is all, the output head too). */
  gpu_layers: number;
  /** `--rpc`: the RPC workers used, in order (the supervisor watches them while it runs); none, no flag. */
  rpc_workers: string[];
  /** `--tensor-split`: layers per device in llama-server's order; null leaves the split to llama-server. */
  tensor_split: number[] | null;
  /**
   * `--device`: the only devices llama-server may offload to, the planned GPUs by their listed
   * names, where it lists one the plan leaves out (decide/offload-devices.ts); absent or null,
   * llama-server's own choice.
   */
  devices?: string[] | null;
  /** `-t` */
  threads: number;
  /** `-fa` */
  flash_attn: Config["llama"]["flash_attn"];
  /** `--cache-type-k`, `--cache-type-v` */
  cache_type_k: KvCacheType;
  cache_type_v: KvCacheType;
  /** How the weights are held (`llama.mmap`, `llama.mlock`), spelled as the binary takes it. */
  mmap: boolean;
  mlock: boolean;
  /** `--jinja`: the model's own chat template, which tool calling needs. */
  jinja: boolean;
  /** `--sleep-idle-seconds` (`llama.idle_sleep_s`); 0 never sleeps, and has no flag. */
  idle_sleep_s: number;
  /**
   * `llama.extra_args`, as the user wrote them, passed through last so they win. They are not
   * read: a flag there that repeats a decision above is llama-server's to settle.
   */
  extra_args: string[];
  /**
   * Whether the chat template lets the model think (not a flag: status shows it until /props
   * says); null or absent when unknown.
   */
  thinking?: boolean | null;
  /**
   * `--cache-ram` in MiB: llama-server's RAM prompt cache (prompts that left their slot), sized
   * from the memory budget; always rendered, never llama-server's own 8 GiB default. 0 is off.
   */
  cache_ram_mib: number;
  /** `--slot-save-path`: the folder slot files are saved to and restored from (data_dir/kv); null: none. */
  slot_save_path: string | null;
  /**
   * A model of kind embedding (decide/embedding.ts): `--embeddings --pooling X -b N -ub N`, and no
   * KV cache types (nothing to quantize). Absent or null: a chat model.
   */
  embedding?: EmbeddingPlan | null;
  /**
   * `--mmproj` and the image token limits (docs/plan.md "The projector"): the vision projector a
   * chat model runs with. Absent or null: none (the model reads no images).
   */
  mmproj?: { path: string; image_tokens: { max: number | null; min: number | null } } | null;
}
