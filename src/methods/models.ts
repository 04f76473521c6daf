import { listModelsFor } from "../models/list.ts";
import { ModelsParamsSchema, ModelsResultSchema } from "../protocol/models.ts";
import { defineMethod } from "./definition.ts";
import type { Services } from "./services.ts";

/** Every GGUF in the Hugging Face cache and beside the config, with whether it fits this machine. */
export const models = defineMethod({
  name: "models",
  params: ModelsParamsSchema,
  result: () => ModelsResultSchema,
  // Not cancellable (docs/protocol.md), but the core's stop ends it: it does not wait for it.
  run: async (_params, ctx, services) =>
    listModelsFor(
      {
        loadedConfig: () => services.loadedConfig(),
        defaultConfig: () => services.defaultConfig(),
        loadedModels: () => loadedModels(services),
      },
      process.env,
      { stop: ctx.stopping },
    ),
});

/**
 * What this core serves now: several models' files once wired, else the one llama-server's
 * model while it serves (`ready`, asleep or awake). Never creates a service. Not while it starts
 * or restarts after a crash: status says `starting` or `restarting` then, and several models'
 * listing leaves a model loading out, so one host's picker read two ways.
 */
function loadedModels(services: Services): string[] {
  const several = services.models?.({ create: false });
  if (several) return several.loadedPaths();
  const snap = services.existingLlama()?.snapshot?.();
  const running = snap?.pid != null && snap.state === "ready";
  return running && snap.model.path ? [snap.model.path] : [];
}
