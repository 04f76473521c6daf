import { join } from "node:path";
import { type Config, ConfigSchema } from "../../src/config/schema.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";

/**
 * The stand-in llama-server (with `env`) and one model file, configured both as the model
 * section (`default`) and as a second model named "odd": what the several-models tests here share.
 */
export function oddModelStack(
  dir: string,
  env: Record<string, string>,
): { binary: string; model: string; config: Config } {
  const binary = writeFakeLlamaServer(dir, { FAKE_LLAMA_LOAD_MS: "20", ...env });
  const model = writeFakeModel(dir);
  const config = ConfigSchema.parse({
    app: { data_dir: join(dir, "data") },
    llama: { binary, idle_sleep_s: 0 },
    model: { path: model },
    models: [{ name: "odd", path: model }],
  });
  return { binary, model, config };
}
