/**
 * The llama-server stand-in as a Windows program (llama-server.exe). On Linux a wrapper script
 * exports its FAKE_LLAMA_* knobs; a Windows exe has no such script, and the core passes
 * llama-server only an allowlisted environment, so the knobs come from a JSON file beside the
 * exe (`llama-server.knobs.json`, written by the suite) before the stand-in itself loads.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

try {
  const knobs = JSON.parse(readFileSync(join(dirname(process.execPath), "llama-server.knobs.json"), "utf8"));
  for (const [name, value] of Object.entries(knobs as Record<string, string>))
    if (name.startsWith("FAKE_LLAMA_")) process.env[name] = String(value);
} catch {
  // No knobs file: the stand-in's defaults (an echo).
}
await import("../fixtures/llama-stand-in/main.ts");
