import { DEFAULT_CONFIG_FILE } from "../config/load.ts";

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
