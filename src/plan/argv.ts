import type { LaunchPlan } from "./launch-plan.ts";

/**
 * The launch plan as llama-server's arguments: the one place a decision becomes flags. The
 * planner's report lines take their flags from here too, so each decision's flags, the
 * report's argv and the argv launched are one rendering.
 */

/**
 * What a binary takes where builds differ. `memory`: `--no-mmap`/`--mlock`, which every build
 * with those settings understands up to b10587 (where they are already "DEPRECATED in favor of
 * `--load-mode`": test/fixtures/llama-server/transcripts/help.txt), or `--load-mode`, which later
 * builds require ("error: invalid argument: --no-mmap", commit de3ff81) and earlier ones lack
 * (runtime/load-mode.ts asks the binary).
 */
export interface ArgvDialect {
  memory: "mmap-flags" | "load-mode";
}

/** The dialect the plan report shows: the flags that match the config keys one for one. */
export const PLAN_DIALECT: ArgvDialect = { memory: "mmap-flags" };

export const flags = {
  model: (path: string) => ["-m", path],
  slots: (n: number) => ["-np", String(n)],
  context: (perSlot: number, slots: number) => ["-c", String(perSlot * slots)],
  gpuLayers: (n: number) => ["-ngl", String(n)],
  rpc: (workers: readonly string[]) => (workers.length > 0 ? ["--rpc", workers.join(",")] : []),
  tensorSplit: (shares: readonly number[] | null) => (shares ? ["--tensor-split", shares.join(",")] : []),
  devices: (names: readonly string[] | null | undefined) => (names ? ["--device", names.join(",")] : []),
  threads: (n: number) => ["-t", String(n)],
  flashAttn: (mode: LaunchPlan["flash_attn"]) => ["-fa", mode],
  cacheTypes: (k: string, v: string) => ["--cache-type-k", k, "--cache-type-v", v],
  memory: (m: Pick<LaunchPlan, "mmap" | "mlock">, dialect: ArgvDialect): string[] => {
    if (dialect.memory === "mmap-flags")
      return [...(m.mmap ? [] : ["--no-mmap"]), ...(m.mlock ? ["--mlock"] : [])];
    if (!memoryFlagged(m)) return [];
    return ["--load-mode", m.mmap ? "mmap+mlock" : m.mlock ? "mlock" : "none"];
  },
  mmproj: (path: string | null) => (path === null ? [] : ["--mmproj", path]),
  /** The image token limits (docs/plan.md "Images cost context"); each only when set. */
  imageTokens: (t: { max: number | null; min: number | null }) => [
    ...(t.max === null ? [] : ["--image-max-tokens", String(t.max)]),
    ...(t.min === null ? [] : ["--image-min-tokens", String(t.min)]),
  ],
  jinja: (on: boolean) => (on ? ["--jinja"] : []),
  idleSleep: (seconds: number) => (seconds > 0 ? ["--sleep-idle-seconds", String(seconds)] : []),
  cacheRam: (mib: number) => ["--cache-ram", String(mib)],
  slotSavePath: (dir: string | null) => (dir === null ? [] : ["--slot-save-path", dir]),
  /** An embedding model's (decide/embedding.ts): its pooling, and `-ub` as `-b` (llama-server forces it). */
  embeddings: (pooling: string) => ["--embeddings", "--pooling", pooling],
  batch: (tokens: number) => ["-b", String(tokens), "-ub", String(tokens)],
};

/**
 * A command-line word's flag as llama-server reads it: a `--` flag before any `=`, its `_` as `-`
 * (common/arg.cpp: `--api_key` is `--api-key`); any other word as it is.
 */
export function llamaFlagName(arg: string): string {
  if (!arg.startsWith("--")) return arg;
  const eq = arg.indexOf("=");
  return (eq > 0 ? arg.slice(0, eq) : arg).replaceAll("_", "-");
}

/**
 * `args` less the flags named (and, for a valued one, its value): what a fingerprint keys when those
 * flags cannot change what it guards (server/vector-flags.ts, agent/kv/kv-flags.ts).
 */
export function argsWithout(
  args: readonly string[],
  flags: { valued: ReadonlySet<string>; bare: ReadonlySet<string> },
): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const name = llamaFlagName(arg);
    if (flags.bare.has(name)) continue;
    if (flags.valued.has(name)) {
      // `--flag=value` holds its value; `--flag value` takes the next word.
      if (!(arg.startsWith("--") && arg.includes("="))) i++;
      continue;
    }
    out.push(arg);
  }
  return out;
}

/** Whether the weights are held other than llama-server's default (mmap, unlocked): a flag whose spelling the dialect decides. */
export function memoryFlagged(m: Pick<LaunchPlan, "mmap" | "mlock">): boolean {
  return !m.mmap || m.mlock;
}

/** llama-server's arguments for the plan, without --host, --port and the key; extra_args last, so they win. */
export function renderArgv(plan: LaunchPlan, dialect: ArgvDialect): string[] {
  return [
    ...flags.model(plan.model_path),
    ...flags.slots(plan.slots),
    ...flags.context(plan.context_per_slot, plan.slots),
    ...(plan.embedding
      ? [...flags.embeddings(plan.embedding.pooling), ...flags.batch(plan.embedding.batch)]
      : []),
    ...flags.gpuLayers(plan.gpu_layers),
    ...flags.devices(plan.devices),
    ...flags.rpc(plan.rpc_workers),
    ...flags.tensorSplit(plan.tensor_split),
    ...flags.threads(plan.threads),
    ...flags.flashAttn(plan.flash_attn),
    // An embedding model keeps no KV cache worth quantizing (docs/plan.md "Embedding models").
    ...(plan.embedding ? [] : flags.cacheTypes(plan.cache_type_k, plan.cache_type_v)),
    ...flags.memory(plan, dialect),
    ...flags.mmproj(plan.mmproj?.path ?? null),
    ...(plan.mmproj ? flags.imageTokens(plan.mmproj.image_tokens) : []),
    ...flags.jinja(plan.jinja),
    ...flags.idleSleep(plan.idle_sleep_s),
    ...flags.cacheRam(plan.cache_ram_mib),
    ...flags.slotSavePath(plan.slot_save_path),
    ...plan.extra_args,
  ];
}
