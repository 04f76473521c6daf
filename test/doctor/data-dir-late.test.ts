import { expect, test } from "bun:test";
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runDoctor } from "../../src/doctor/doctor.ts";
import { DriveAnswers } from "../../src/util/drive-answers.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { checkById, coreWithConfig, doctorDeps } from "./helpers/config-core.ts";

/**
 * A share whose stat never returns (a hard-mounted NFS share whose server is gone, as docs/agent.md
 * describes of a share gone offline); every other path is stat'ed here and handed back resolved.
 * A real stat off the loop raced the 20 ms wait meant for the share, and lost it on a loaded box
 * (mcp:bare's /bin was "late" under a CPU hog).
 */
const shareGone = async (path: string | Buffer) =>
  String(path).includes("/share/") ? new Promise(() => {}) : statSync(path);

test("a data_dir whose drive never answers a stat: data_dir fails saying so, store and run_records are skipped", async () => {
  using dir = tmpdir();
  const core = coreWithConfig(dir.path, "app:\n  data_dir: ./share/data\n");
  const drive = new DriveAnswers({
    stat: shareGone,
    statWaitMs: 20,
  });
  const r = await runDoctor(core, { ...doctorDeps, drive });
  expect(checkById(r, "data_dir")).toMatchObject({ status: "fail", data: { problem: "ETIMEDOUT" } });
  expect(checkById(r, "data_dir")!.message).toContain("did not answer");
  expect(checkById(r, "store")?.status).toBe("skip");
  expect(checkById(r, "run_records")?.status).toBe("skip");
  expect(r.ok).toBe(false);
});

test("data_dir a file: store and run_records are skipped, not 'no database yet'; a bad logs/ inside skips neither", async () => {
  using dir = tmpdir();
  writeFileSync(join(dir.path, "afile"), "x");
  const core = coreWithConfig(dir.path, "app:\n  data_dir: ./afile\n");
  const r = await runDoctor(core, doctorDeps);
  expect(checkById(r, "data_dir")?.status).toBe("fail");
  expect(checkById(r, "store")).toMatchObject({ status: "skip" });
  expect(checkById(r, "run_records")).toMatchObject({ status: "skip" });

  mkdirSync(join(dir.path, "data"));
  writeFileSync(join(dir.path, "data", "logs"), "x");
  const inside = coreWithConfig(dir.path, "app:\n  data_dir: ./data\n");
  const r2 = await runDoctor(inside, doctorDeps);
  expect(checkById(r2, "data_dir")).toMatchObject({ status: "fail", data: { problem: "ENOTDIR" } });
  expect(checkById(r2, "store")?.status).toBe("ok");
  expect(checkById(r2, "run_records")?.status).toBe("ok");
});

test("an MCP server whose command sits on a share that never answers: its check fails saying so, the rest run", async () => {
  using dir = tmpdir();
  const core = coreWithConfig(
    dir.path,
    "mcp_servers:\n  - name: far\n    command: /mnt/share/bin/server\n  - name: near\n    command: /bin/sh\n" +
      // A bare command's lookup (Bun.which) stats each PATH folder in turn, on the loop.
      "  - name: onpath\n    command: sh\n    env:\n      PATH: /mnt/share/bin:/bin\n  - name: bare\n    command: sh\n    env:\n      PATH: /bin\n",
  );
  const drive = new DriveAnswers({
    stat: shareGone,
    statWaitMs: 20,
    // Lanes to spare: with every lane held by a hung stat every path is late (util/drive-answers.ts).
    lanes: 4,
  });
  const r = await runDoctor(core, { ...doctorDeps, drive });
  expect(checkById(r, "mcp:far")).toMatchObject({ status: "fail", data: { problem: "ETIMEDOUT" } });
  expect(checkById(r, "mcp:near")).toMatchObject({ status: "ok" });
  expect(checkById(r, "mcp:onpath")).toMatchObject({ status: "fail", data: { problem: "ETIMEDOUT" } });
  expect(checkById(r, "mcp:bare")).toMatchObject({ status: "ok" });
});
