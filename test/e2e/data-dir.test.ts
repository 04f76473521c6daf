import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnCore } from "../fixtures/core-process.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// issue 10 item 17: a chat that cannot write under app.data_dir names the folder and the
// problem (as doctor does), instead of "internal error … see the core's log".
const onPosix = process.platform !== "win32";
const asRoot = onPosix && process.getuid?.() === 0;

function stackWithDataDir(dir: string, dataDir: string) {
  const stack = writeStack(dir, { script: [{ content: "never" }] });
  const cfg = join(dir, "config.yaml");
  writeFileSync(cfg, readFileSync(cfg, "utf8").replace("data_dir: ./data", `data_dir: ${dataDir}`));
  return stack;
}

describe.skipIf(!onPosix)("a data_dir the core cannot write", () => {
  test("under a regular file: chat and warmup answer with the path and the problem", async () => {
    await using dir = tmpdir();
    const stack = stackWithDataDir(dir.path, "./afile/data");
    writeFileSync(join(dir.path, "afile"), "x");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const dataDir = join(dir.path, "afile/data");
    const chat = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
    expect(chat).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { key: "app.data_dir", path: dataDir, problem: "ENOTDIR" },
    });
    expect(chat.message).toContain(dataDir);
    expect(chat.message).toContain(`${join(dir.path, "afile")} is a file, not a folder`);
    expect(chat.message).not.toContain("see the core's log");
    const warm = await core.request({ id: 2, method: "warmup" });
    expect(warm).toMatchObject({
      type: "error",
      code: "internal_error",
      data: { key: "app.data_dir", path: dataDir },
    });
    expect(warm.message).toContain("is a file, not a folder");
    await core.request({ id: 9, method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 30_000);

  test("app.data_dir itself a file: sessions.list and sessions.get name it as chat does", async () => {
    await using dir = tmpdir();
    const stack = stackWithDataDir(dir.path, "./data");
    const dataDir = join(dir.path, "data");
    writeFileSync(dataDir, "i am a file");
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    for (const [id, method, params] of [
      [1, "sessions.list", {}],
      [2, "sessions.get", { session_id: "s" }],
    ] as const) {
      const answer = await core.request({ id, method, params });
      expect(answer).toMatchObject({
        type: "error",
        code: "internal_error",
        data: { key: "app.data_dir", path: dataDir },
      });
      expect(answer.message).toContain(`${dataDir} is a file, not a folder`);
    }
    await core.request({ id: 9, method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 30_000);

  // root writes anywhere: only an unprivileged user meets a read-only folder.
  test.skipIf(asRoot)(
    "a read-only folder: permission denied, with the path",
    async () => {
      await using dir = tmpdir();
      const stack = stackWithDataDir(dir.path, "./ro/data");
      mkdirSync(join(dir.path, "ro"));
      chmodSync(join(dir.path, "ro"), 0o555);
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      const chat = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
      expect(chat).toMatchObject({ code: "internal_error", data: { problem: "EACCES" } });
      expect(chat.message).toContain("permission denied");
      chmodSync(join(dir.path, "ro"), 0o755);
      await core.request({ id: 9, method: "shutdown" });
    },
    30_000,
  );
});
