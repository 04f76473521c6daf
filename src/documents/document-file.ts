import { openFilesUsedUp } from "../protocol/errors.ts";
import { windowsDevicePath } from "../util/device-path.ts";
import { type DriveAnswers, drives, whyLate } from "../util/drive-answers.ts";
import { isFullPath } from "../util/full-path.ts";
import { FileTooLarge, NotRegularFile, readFailure, readFileBytesAsync } from "../util/read-file.ts";
import { MAX_DOCUMENT_BYTES } from "./limits.ts";
import { type DocumentProblem, documentProblem } from "./refusal.ts";

/**
 * The one file edge of documents (docs/agent.md "Documents"): a document's bytes as
 * `util/read-file.ts` reads what the user controls (a regular file only, opened without
 * blocking, so a FIFO never hangs the core; links followed), its size checked by stat before a
 * byte is read, and read up to `room` only (the add's place in the reading budget). Every failure is `invalid_request` naming the path, but the core's own open files
 * used up (EMFILE), which is no fault of the file.
 */
export async function readDocumentFile(path: string, room = MAX_DOCUMENT_BYTES): Promise<Uint8Array> {
  // As an image's path (images/prepare.ts): relative to what would be the core's own folder,
  // which a host does not choose.
  if (!isFullPath(path)) throw pathProblem("unreadable", `path must be absolute (${path})`);
  // A pipe's or a device's stat or open reaches it (a pipe's server is connected to): never tried.
  const device = windowsDevicePath(path);
  if (device) throw pathProblem("unreadable", `${path} ${device}`);
  const max = Math.min(room, MAX_DOCUMENT_BYTES);
  try {
    return await readFileBytesAsync(path, max);
  } catch (err) {
    throw refusalOf(path, err, max);
  }
}

/**
 * The file's size as stat sees it, for a place in the reading budget; 0 when it cannot be seen
 * (the read says why). Asked as a model's path is (util/drive-answers.ts): a drive that does not
 * answer within its wait refuses the add `unreadable`, where the add waited for good (a cancel
 * aside), and each add sent again held one more of the runtime's few file threads.
 */
export async function documentFileSize(path: string, ask: DriveAnswers = drives): Promise<number> {
  // A pipe or a device is never stat'ed (its stat connects to it): its read refuses it.
  if (windowsDevicePath(path)) return 0;
  const st = await ask.statOf(path);
  if (st === "late") throw pathProblem("unreadable", `${path}: ${whyLate(ask, path)}`);
  return st?.size ?? 0;
}

function refusalOf(path: string, err: unknown, max: number): Error {
  // Read up to the room the add holds in the reading budget (add-document.ts), never past.
  if (err instanceof FileTooLarge && err.bytes <= MAX_DOCUMENT_BYTES && max < MAX_DOCUMENT_BYTES)
    return pathProblem(
      "unreadable",
      `${path} grew past the ${max} bytes it had when the add took its place in the reading budget (a file still being written?): send it again once it is complete`,
    );
  if (err instanceof FileTooLarge)
    return pathProblem(
      "too_large",
      `${path} is ${err.bytes} bytes, over the ${err.max} bytes a document may have`,
    );
  if (err instanceof NotRegularFile) return pathProblem("unreadable", `${path} is ${err.kind}, not a file`);
  const ours = openFilesUsedUp(err, `${path} cannot be read now`);
  if (ours) return ours;
  return pathProblem("unreadable", `${path} cannot be read: ${readFailure(err)}`);
}

/** A refusal of the file itself names the param (`data.field: "path"`), for a host's form. */
const pathProblem = (problem: DocumentProblem, message: string) => documentProblem(problem, message, "path");
