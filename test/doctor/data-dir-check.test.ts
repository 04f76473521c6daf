import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { dataDirCheck } from "../../src/doctor/data-dir-check.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

describe.skipIf(process.platform === "win32")("doctor: data_dir writable by others", () => {
  test("group- or world-writable: a warning naming the mode and the fix; owner-only: no warning", () => {
    using dir = tmpdir();
    const data = join(dir.path, "data");
    mkdirSync(data);
    for (const mode of [0o777, 0o775, 0o1777]) {
      chmodSync(data, mode);
      const c = dataDirCheck(configAt(data));
      expect(c).toMatchObject({
        id: "data_dir",
        status: "warn",
        data: { path: data, mode: (mode & 0o777).toString(8) },
      });
      expect(c.message).toContain("writable by other users");
      expect(c.fix).toContain(`chmod 700 ${data}`);
    }
    chmodSync(data, 0o700);
    expect(dataDirCheck(configAt(data)).message).not.toContain("other users");
  });
});
