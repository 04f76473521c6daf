import { DEFAULT_MODEL_NAME, ModelKeysSchema, type ModelKind } from "./model-schema.ts";
import type { Config } from "./schema.ts";

/**
 * One configured model as a single-model planner or supervisor sees it (docs/models.md, "Several
 * models"): the same `Config` with `model` replaced by that entry's keys and the entry's
 * `extra_args` after `llama.extra_args`, so `planLaunch(config, deps)` plans any model unchanged.
 * Pure: the loader has already resolved the entry's paths as it resolves `model.path`.
 */

/** A configured model, as listings show it. */
export interface ConfiguredModel {
  name: string;
  kind: ModelKind;
  pin: boolean;
  path: string;
}

const MODEL_KEYS = Object.keys(ModelKeysSchema.shape) as (keyof Config["model"])[];

/** Every configured model, `default` (the model section) first, then `models` in order. */
export function configuredModels(config: Config): ConfiguredModel[] {
  return [
    { name: DEFAULT_MODEL_NAME, kind: "chat", pin: false, path: config.model.path },
    ...config.models.map((m) => ({ name: m.name, kind: m.kind, pin: m.pin, path: m.path })),
  ];
}

/**
 * One model's config: `model_kind` (absent: chat) tells the planner to plan an embedding model as
 * one (src/plan/embedding-planner.ts); `model_key` (absent: `model`) is where its section sits in
 * the config file (`models.<i>`), so a refusal of its `path` or `mmproj` names the key the user
 * wrote. A config with them is still a `Config` to everything else.
 */
export type ModelConfig = Config & {
  model_kind?: ModelKind;
  /** `null`: the model is the request's own `model` param, not a config section. */
  model_key?: string | null;
  gpu_out_of_memory?: number;
};

/** What names a model given as a request's `model` param, where a config key would otherwise be. */
export const REQUEST_MODEL_KEY = "model";

/**
 * The config key of one of the model's settings: `model.path`, `models.<i>.mmproj`; for a
 * request's own model, its path is the param (REQUEST_MODEL_KEY), and its other settings are the
 * model section's it is planned with (its projector, `auto`, names `model.mmproj` were it to fail).
 */
export function modelSettingKey(config: ModelConfig, setting: "path" | "mmproj"): string {
  if (config.model_key === null && setting === "path") return REQUEST_MODEL_KEY;
  return `${config.model_key ?? "model"}.${setting}`;
}

/** How an error's data names where a model's setting came from: the config key, or the request's field. */
export function settingData(key: string): { key: string } | { field: string } {
  return key === REQUEST_MODEL_KEY ? { field: key } : { key };
}

/** The config a single-model planner would get for `name`; undefined when no model has that name. */
export function configForModel(config: Config, name: string): ModelConfig | undefined {
  if (name === DEFAULT_MODEL_NAME) return config;
  const index = config.models.findIndex((m) => m.name === name);
  const entry = config.models[index];
  if (!entry) return undefined;
  const model = Object.fromEntries(MODEL_KEYS.map((k) => [k, entry[k]])) as Config["model"];
  return {
    ...config,
    model,
    model_kind: entry.kind,
    model_key: `models.${index}`,
    llama: { ...config.llama, extra_args: [...config.llama.extra_args, ...entry.extra_args] },
  };
}

/**
 * A path or `hf:` reference a chat named (docs/models.md): planned with the model section's keys,
 * but its own projector (`auto`), as `plan {model}` and the `models` listing judge it: the
 * section's `mmproj` is its model's, and another model given it was refused for a width it never
 * had, or started with a projector not its own (and a chat's images refused for the section's
 * `mmproj: none`, methods/chat.ts).
 */
export function modelConfig(config: Config, name: string, file = name): ModelConfig {
  return (
    configForModel(config, name) ?? {
      ...config,
      model: { ...config.model, path: file, mmproj: "auto" },
      model_key: null,
    }
  );
}
