import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A host shows doctor's messages and fixes as they are: a path of the config's spelling carried
// its control characters raw (U+009B opens a sequence as ESC [ does), as the CLI never shows them.
describe.skipIf(process.platform === "win32")("the doctor method's text", () => {
  test("a data_dir spelled with control characters is marked ? in messages and fixes, exact in data", async () => {
    using dir = tmpdir();
    const dataDir = join(dir.path, "my\u009b2J\u001bdata");
    writeFileSync(dataDir, "a file where the folder belongs");
    const config = join(dir.path, "config.yaml");
    writeFileSync(config, JSON.stringify({ app: { data_dir: dataDir } }));
    const h = startHarness({ cwd: dir.path, configPath: config });
    h.sendRaw('{"id":"d","method":"doctor"}\n');
    h.end();
    await h.exit;
    const checks = (h.terminal("d") as { result: { checks: Record<string, unknown>[] } }).result.checks;
    const check = checks.find((c) => c.id === "data_dir")!;
    expect(String(check.message)).toContain("my?2J?data");
    for (const c of checks) expect(`${c.message} ${c.fix ?? ""}`).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(check.data).toMatchObject({ path: dataDir });
  });
});
