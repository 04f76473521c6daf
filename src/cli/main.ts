import { defineCommand } from "citty";
import { NAME, VERSION } from "../version.ts";

/** Subcommands load lazily: `--version` and serve-stdio's cold start skip what they don't use. */
export const main = defineCommand({
  meta: { name: NAME, version: VERSION, description: "The AI core beside llama.cpp's llama-server" },
  subCommands: {
    "serve-stdio": () => import("./serve-stdio.ts").then((m) => m.default),
    doctor: () => import("./doctor.ts").then((m) => m.default),
    plan: () => import("./plan.ts").then((m) => m.default),
    models: () => import("./models.ts").then((m) => m.default),
    pull: () => import("./pull.ts").then((m) => m.default),
  },
});
