import type { Config } from "../config/schema.ts";
import { listTextFiles, MAX_FOLDER_FILES } from "../store/folder-walk.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import type { Check } from "./checks.ts";

/**
 * `memory_folders` (docs/doctor.md): each of `memory.folders` walked as the core's index walks
 * it (store/folder-walk.ts: the same files, the core's own left out), reading no file. Warns
 * about a folder that cannot be read and one with more text files than the index takes (the
 * core logs that once, on stderr, where a host may not look); counts the text files the index
 * skips (over 1 MiB; the core logs each once). No check without folders.
 */
export async function memoryFoldersCheck(
  config: Config,
  configFile: string | null,
  maxFiles = MAX_FOLDER_FILES,
  drive: DriveAnswers = drives,
): Promise<Check[]> {
  const folders = config.memory.folders;
  if (folders.length === 0) return [];
  const exclude = [config.app.data_dir, ...(configFile ? [configFile] : [])];
  const failed = new Map<string, string>();
  const walked = await Promise.all(
    folders.map(async (path) => {
      // A drive that stops answering fails the walk (store/folder-walk.ts), as running out of open
      // files does: the folder cannot be read, and why is said (it may well exist).
      const { files, dirs, full, skipped } = await listTextFiles(path, exclude, maxFiles, drive).catch(
        (err: Error) => {
          failed.set(path, err.message);
          return { files: [], dirs: [] as string[], full: false, skipped: [] };
        },
      );
      return { path, files: files.length, full, readable: dirs.includes(path), skipped: skipped.length };
    }),
  );
  const unreadable = walked
    .filter((f) => !f.readable)
    .map((f) => (failed.has(f.path) ? `${f.path} (${failed.get(f.path)})` : f.path));
  const full = walked.filter((f) => f.full).map((f) => f.path);
  const data = { folders: walked, max_files: maxFiles };
  const problems = [
    ...(unreadable.length > 0 ? [`cannot be read: ${unreadable.join(", ")}`] : []),
    ...(full.length > 0
      ? [`more than ${maxFiles} text files (only ${maxFiles} of each are indexed): ${full.join(", ")}`]
      : []),
  ];
  if (problems.length === 0) {
    const total = walked.reduce((n, f) => n + f.files, 0);
    const skipped = walked.reduce((n, f) => n + f.skipped, 0);
    // Skipped by rule (over 1 MiB), not a fault to fix: counted, not warned about.
    const also = skipped > 0 ? `, ${skipped} skipped (over 1 MiB, or no size to be read)` : "";
    return [
      {
        id: "memory_folders",
        status: "ok",
        message: `${folders.length} memory folder(s), ${total} text file(s) to index${also}`,
        data,
      },
    ];
  }
  const fixes = [
    ...(unreadable.length > 0
      ? [
          "check that the folder exists and can be read (a network share: that it is online), or remove it from memory.folders",
        ]
      : []),
    ...(full.length > 0
      ? ["name its subfolders in memory.folders instead: each has the cap of its own"]
      : []),
  ];
  return [
    {
      id: "memory_folders",
      status: "warn",
      message: `memory folders: ${problems.join("; ")}`,
      fix: fixes.join("; "),
      data,
    },
  ];
}
