import { afterAll } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { undoImmutable } from "./fixtures/full-disk.ts";
import { removeLeftoverTmpdirs } from "./fixtures/tmpdir.ts";

// Every test file gets its own HOME and XDG dirs, and no inherited knobs that would change
// behaviour (log level, test methods, llama-server's own LLAMA_ARG_* variables).
const home = mkdtempSync(join(tmpdir(), "local-ai-test-home-"));
process.env.HOME = home;
process.env.XDG_CONFIG_HOME = join(home, ".config");
process.env.XDG_DATA_HOME = join(home, ".local/share");
process.env.XDG_CACHE_HOME = join(home, ".cache");
for (const key of Object.keys(process.env)) {
  if (key.startsWith("LLAMA_ARG_") || key === "LLAMA_API_KEY" || key === "LOCAL_AI_TEST_METHODS") {
    delete process.env[key];
  }
}
process.env.LOCAL_AI_LOG_LEVEL ??= "silent";

afterAll(() => {
  // First: a test that timed out with a file made immutable never ran its own undo.
  undoImmutable();
  // HOME removed even when one of them could not be: the error still fails the run.
  try {
    removeLeftoverTmpdirs();
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
