import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { DEFAULT_CONFIG_FILE, refuseConfigPath } from "../config/load.ts";
import { CoreError } from "../protocol/errors.ts";

export const configArg = {
  config: {
    type: "string",
    description: "config file (relative paths inside it resolve against its folder)",
    default: DEFAULT_CONFIG_FILE,
    valueHint: "FILE",
  },
} as const;

export const jsonArg = {
  json: { type: "boolean", description: "print JSON for scripts instead of the human view", default: false },
} as const;

/**
 * For the commands that go on with the defaults when there is no config (models, pull): a config
 * named on the command line that is not there is a mistake to say, not a reason to use them.
 */
export function requireNamedConfig(config: string): void {
  refuseConfigPath(config);
  if (config !== DEFAULT_CONFIG_FILE && !existsSync(resolve(config)))
    throw new CoreError("config_missing", `no config file at ${resolve(config)}`, { file: resolve(config) });
}
