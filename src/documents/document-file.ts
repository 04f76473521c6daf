import { FileTooLarge, NotRegularFile, readFileBytesAsync } from "../util/read-file.ts";
import { MAX_DOCUMENT_BYTES } from "./limits.ts";
import { documentProblem } from "./refusal.ts";

/**
 * The one file edge of documents (docs/agent.md "Documents"): a document's bytes as
 * `util/read-file.ts` reads what the user controls (a regular file only, opened without
 * blocking, so a FIFO never hangs the core; links followed), its size checked by stat before a
 * byte is read. Every failure is `invalid_request` naming the path.
 */
export async function readDocumentFile(path: string): Promise<Uint8Array> {
  try {
    return await readFileBytesAsync(path, MAX_DOCUMENT_BYTES);
  } catch (err) {
    throw refusalOf(path, err);
  }
}

const OS_REASONS: Record<string, string> = {
  ENOENT: "no such file",
  ENOTDIR: "a folder on its path is not a folder",
  EACCES: "permission denied",
  EPERM: "permission denied",
  ELOOP: "a loop of symbolic links",
  ENAMETOOLONG: "the path is too long",
};

function refusalOf(path: string, err: unknown): Error {
  if (err instanceof FileTooLarge)
    return documentProblem(
      "too_large",
      `${path} is ${err.bytes} bytes, over the ${err.max} bytes a document may have`,
    );
  if (err instanceof NotRegularFile)
    return documentProblem("unreadable", `${path} is ${err.kind}, not a file`);
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const reason = (code && OS_REASONS[code]) ?? (err instanceof Error ? err.message : String(err));
  return documentProblem("unreadable", `${path} cannot be read: ${reason}`);
}
