import pkg from "../package.json" with { type: "json" };

// build.ts defines LOCAL_AI_VERSION at compile time; running from source falls back to package.json.
declare const LOCAL_AI_VERSION: string | undefined;

export const NAME = "local-ai";
export const VERSION: string = typeof LOCAL_AI_VERSION === "string" ? LOCAL_AI_VERSION : pkg.version;
