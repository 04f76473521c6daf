import type { Config } from "./schema.ts";

/**
 * llama-server's flags (common/arg.cpp) that give it a projector: a file, a URL, or `-hf`'s
 * download of its repo's mmproj (`--mmproj-auto` is that download's switch).
 */
const PROJECTOR_FLAG = /^(-mm|--mmproj|-mmu|--mmproj-url|--mmproj-auto|-hf|-hfr|--hf-repo)(=|$)/;

/**
 * A model's config (config/model-entry.ts `configForModel`) says its llama-server reads no images:
 * `mmproj: none` and no extra_args that add one. A chat's images are then refused before they
 * are read (docs/protocol.md#images); `auto` is known only once planned, or from its /props.
 */
export function configReadsNoImages(config: Config): boolean {
  return (
    config.model.mmproj === "none" && !config.llama.extra_args.some((a) => PROJECTOR_FLAG.test(flagOf(a)))
  );
}

/**
 * A `--` flag as llama-server reads it, its `_` as `-` (common/arg.cpp; plan/argv.ts
 * `llamaFlagName`, a floor above this one): `--hf_repo` downloads a projector as `--hf-repo` does.
 */
const flagOf = (arg: string) => (arg.startsWith("--") ? arg.replaceAll("_", "-") : arg);
