import { z } from "zod";
import { HF_PREFIX, parseHfModelPath } from "../protocol/model-ref.ts";
import { ExtraArgsSchema } from "./extra-args.ts";

/**
 * The model sections of config.yaml: `model` (the model named `default`) and `models`, more
 * models by name (docs/models.md, "Several models"). Relative paths are resolved by the loader.
 */

const positiveInt = z.number().int().positive();
const nonNegativeInt = z.number().int().nonnegative();
const auto = z.literal("auto");

/** The name the `model` section goes by: never a `models` entry's. */
export const DEFAULT_MODEL_NAME = "default";

/** The syntax of an `hf:` model path only: whether it is cached is the model read's question. */
function hfRefIsValid(path: string): boolean {
  return hfRefProblem({ input: path }) === undefined;
}

function hfRefProblem(issue: { input?: unknown }): string | undefined {
  const path = String(issue.input);
  if (!path.startsWith(HF_PREFIX)) return undefined;
  try {
    parseHfModelPath(path);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** A GGUF file, or `hf:org/name[:QUANT|:file.gguf]` from the Hugging Face cache (checked here, found later). */
const modelPath = z.string().min(1).refine(hfRefIsValid, { error: hfRefProblem });

/** Every key of `model`: a `models` entry takes each of them too. */
export const ModelKeysSchema = z.object({
  path: modelPath.default("./models/model.gguf"),
  /** Tokens per slot, or "auto" for the largest that fits with room to spare. */
  context: z.union([auto, positiveInt]).default("auto"),
  /** Layers to offload to the GPU, or "auto". */
  gpu_layers: z.union([auto, nonNegativeInt]).default("auto"),
  /** Cap on reply length in tokens, or null for the rest of the slot's context. */
  max_tokens: positiveInt.nullable().default(null),
  /**
   * The vision projector (docs/models.md "The projector"): a GGUF path, `auto` (an `mmproj*.gguf`
   * in the model's hub snapshot, else the only one beside the model file), or `none`.
   */
  mmproj: modelPath.default("auto"),
});
export type ModelKeys = z.infer<typeof ModelKeysSchema>;

export const ModelSchema = ModelKeysSchema.prefault({});

/** A model's name: what a chat's `model`, an agent's `model` and `memory.embedding_model` say. */
export const ModelNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, "1 to 64 characters from A-Z a-z 0-9 . _ -")
  .refine((name) => name !== DEFAULT_MODEL_NAME, {
    error: `'${DEFAULT_MODEL_NAME}' is the name of the model section; choose another`,
  });

export const ModelKindSchema = z.enum(["chat", "embedding"]);
export type ModelKind = z.infer<typeof ModelKindSchema>;

export const ModelsEntrySchema = ModelKeysSchema.extend({
  name: ModelNameSchema,
  /** No default: an entry names its own file. */
  path: modelPath,
  kind: ModelKindSchema.default("chat"),
  /** Never unloaded to make room for another model. */
  pin: z.boolean().default(false),
  /** Added after `llama.extra_args` for this model's llama-server only. */
  extra_args: ExtraArgsSchema,
});
export type ModelsEntry = z.infer<typeof ModelsEntrySchema>;

/**
 * `models`: each name listed once, case aside (the issue names the second entry's `name`). A
 * name also names its llama-server's log and pid record (server/model-runtime.ts `instanceOf`):
 * where file names ignore case (macOS, Windows), `Qwen` and `qwen` would share them, and one's
 * stop remove the other's record, leaving its server unreaped after a crash of the core.
 */
export const ModelsSchema = z
  .array(ModelsEntrySchema)
  .default([])
  .superRefine((entries, ctx) => {
    const seen = new Map<string, { name: string; at: number }>();
    entries.forEach((entry, i) => {
      const first = seen.get(entry.name.toLowerCase());
      if (first === undefined) seen.set(entry.name.toLowerCase(), { name: entry.name, at: i });
      else
        ctx.addIssue({
          code: "custom",
          path: [i, "name"],
          message:
            first.name === entry.name
              ? `'${entry.name}' is listed twice (entries ${first.at} and ${i}); names must be unique`
              : `'${entry.name}' and '${first.name}' (entries ${first.at} and ${i}) differ in case only; names must be unique whatever their case (they name files)`,
        });
    });
  });

/** What the cross-check reads of a parsed config. */
interface ModelRefs {
  models: { name: string; kind: ModelKind }[];
  agents: { model: string }[];
  memory: { embedding_model: string | null };
}

/**
 * The names other sections give: each agent's `model` a configured chat model, and
 * `memory.embedding_model` one of kind embedding. Each refusal names its key.
 */
export function checkModelNames(config: ModelRefs, ctx: z.RefinementCtx): void {
  const kinds = new Map<string, ModelKind>([[DEFAULT_MODEL_NAME, "chat"]]);
  for (const m of config.models) kinds.set(m.name, m.kind);
  const names = [...kinds.keys()].join(", ");
  config.agents.forEach((agent, i) => {
    const kind = kinds.get(agent.model);
    if (kind === undefined)
      ctx.addIssue({
        code: "custom",
        path: ["agents", i, "model"],
        message: `no model named '${agent.model}' (configured: ${names})`,
      });
    else if (kind === "embedding")
      ctx.addIssue({
        code: "custom",
        path: ["agents", i, "model"],
        message: `'${agent.model}' is an embedding model; an agent needs a model of kind chat`,
      });
  });
  const embedding = config.memory.embedding_model;
  if (embedding !== null && kinds.get(embedding) !== "embedding")
    ctx.addIssue({
      code: "custom",
      path: ["memory", "embedding_model"],
      message:
        kinds.get(embedding) === undefined
          ? `no model named '${embedding}' (configured: ${names})`
          : `'${embedding}' is of kind chat; memory.embedding_model needs a models entry of kind embedding`,
    });
}
