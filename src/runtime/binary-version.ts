import { type DriveAnswers, drives } from "../util/drive-answers.ts";

/**
 * One version of a binary file: its path, size and modification time (undefined when it cannot
 * be read). What a llama-server build can do is remembered per version, so a build updated in
 * place is asked again. Its stat is asked of its drive off the loop (util/drive-answers.ts): a
 * synchronous one held the whole core, ping and cancel too, at every start and doctor while the
 * binary sat on a network share gone offline. One that does not answer is no version: not
 * remembered, asked again.
 */
export async function binaryVersion(path: string, drive: DriveAnswers = drives): Promise<string | undefined> {
  const st = await drive.statOf(path);
  return st && st !== "late" ? `${path}\0${st.size}\0${st.mtimeMs}` : undefined;
}
