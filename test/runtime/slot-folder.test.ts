import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { withSlotFolder } from "../../src/runtime/slot-folder.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { testPlan } from "./helpers/harness.ts";

// The real llama-server (b10587) exits 1 at start-up on a --slot-save-path that is not a
// folder, so every start makes it first, whoever planned the start.
describe("the KV state folder before a start", () => {
  test("made owner-only when missing; the plan keeps its flag", () => {
    using dir = tmpdir();
    const kv = join(dir.path, "data", "kv");
    const plan = withSlotFolder(testPlan("m.gguf", { slot_save_path: kv }));
    expect(plan.slot_save_path).toBe(kv);
    expect(statSync(kv).isDirectory()).toBe(true);
    if (process.platform !== "win32") expect(statSync(kv).mode & 0o777).toBe(0o700);
  });

  test("one that cannot be made drops the flag: the server starts without KV state on disk", () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "file"), "");
    const plan = withSlotFolder(testPlan("m.gguf", { slot_save_path: join(dir.path, "file", "kv") }));
    expect(plan.slot_save_path).toBeNull();
  });

  test.skipIf(process.platform === "win32")(
    "a kv planted as a link to an outside folder is not followed: the flag goes, the outside unchanged",
    () => {
      using dir = tmpdir();
      const outside = join(dir.path, "outside");
      mkdirSync(outside);
      chmodSync(outside, 0o755);
      mkdirSync(join(dir.path, "data"));
      symlinkSync(outside, join(dir.path, "data", "kv"));
      const plan = withSlotFolder(testPlan("m.gguf", { slot_save_path: join(dir.path, "data", "kv") }));
      expect(plan.slot_save_path).toBeNull();
      expect(statSync(outside).mode & 0o777).toBe(0o755);
    },
  );

  test("no folder asked: nothing made", () => {
    const plan = testPlan("m.gguf", { slot_save_path: null });
    expect(withSlotFolder(plan)).toBe(plan);
  });
});
