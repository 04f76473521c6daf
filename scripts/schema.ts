#!/usr/bin/env bun
/** Writes docs/protocol.schema.json from the zod schemas (`bun run schema`); `--check` only compares. */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { loadDefinitions } from "../src/methods/index.ts";
import { protocolJsonSchemaText } from "../src/protocol/json-schema.ts";

export const SCHEMA_FILE = join(import.meta.dir, "../docs/protocol.schema.json");

if (import.meta.main) {
  const text = protocolJsonSchemaText(await loadDefinitions());
  if (process.argv.includes("--check")) {
    let current = "";
    try {
      current = readFileSync(SCHEMA_FILE, "utf8");
    } catch {}
    if (current !== text) {
      console.error(`${SCHEMA_FILE} is stale: run bun run schema`);
      process.exit(1);
    }
  } else {
    mkdirSync(dirname(SCHEMA_FILE), { recursive: true });
    writeFileSync(SCHEMA_FILE, text);
    console.error(`wrote ${SCHEMA_FILE}`);
  }
}
