import { describe, expect, test } from "bun:test";
import { win32 } from "node:path";
import { refuseOwnFile } from "../../src/documents/own-files.ts";

// readDocumentFile (document-file.ts) refuses a Windows device or pipe path, and a relative one,
// by its spelling before any stat or open: on Windows a stat or a realpath opens the path, so a
// named pipe's server is connected to (its one instance taken) and a COM port opened.
describe("refuseOwnFile touches no path the read refuses by its spelling", () => {
  const own = { dataDir: "C:\\data", configFile: "C:\\config.yaml" };
  for (const path of ["\\\\.\\pipe\\chat", "\\\\server\\pipe\\x", "C:\\docs\\COM1.md", "notes.md"])
    test(path, async () => {
      const touched: string[] = [];
      const fs = {
        realpath: async (p: string) => {
          touched.push(p);
          return p;
        },
        stat: async (p: string) => {
          touched.push(p);
          throw new Error("ENOENT");
        },
      };
      await refuseOwnFile(path, own, { rules: win32, fs });
      expect(touched).not.toContain(path);
    });
});

test("a file's path under app.data_dir is still refused with Windows' rules, whatever its case", async () => {
  const fs = { realpath: async (p: string) => p, stat: async () => ({ dev: 1, ino: 0 }) };
  const own = { dataDir: "C:\\Data", configFile: null };
  const refused = refuseOwnFile("c:\\data\\kv\\x.json", own, { rules: win32, fs });
  if (process.platform === "win32" || process.platform === "darwin") await expect(refused).rejects.toThrow();
  else await expect(refused).resolves.toBeUndefined();
  await expect(refuseOwnFile("C:\\Data\\kv\\x.json", own, { rules: win32, fs })).rejects.toThrow(
    "inside app.data_dir",
  );
});
