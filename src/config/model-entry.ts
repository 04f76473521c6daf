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

/** The config a single-model planner would get for `name`; undefined when no model has that name. */
export function configForModel(config: Config, name: string): Config | undefined {
  if (name === DEFAULT_MODEL_NAME) return config;
  const entry = config.models.find((m) => m.name === name);
  if (!entry) return undefined;
  const model = Object.fromEntries(MODEL_KEYS.map((k) => [k, entry[k]])) as Config["model"];
  return {
    ...config,
    model,
    llama: { ...config.llama, extra_args: [...config.llama.extra_args, ...entry.extra_args] },
  };
}
