import { stripVTControlCharacters } from "node:util";
import { type CommandDef, renderUsage } from "citty";

/**
 * Colour only for a person at a terminal: never on a pipe or file, never when NO_COLOR is set
 * to anything (https://no-color.org).
 */
export function colorFor(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(stream.isTTY) && !env.NO_COLOR;
}

/**
 * A command's usage on `stream`: stdout for `--help`, stderr beside a usage error. citty's own
 * showUsage always writes stdout and colours whenever CI/TEST/NO_COLOR=1 are absent, even on a pipe.
 */
export async function writeUsage(
  stream: NodeJS.WriteStream,
  cmd: CommandDef,
  parent?: CommandDef,
): Promise<void> {
  const text = await renderUsage(cmd, parent);
  stream.write(`${colorFor(stream) ? text : stripVTControlCharacters(text)}\n\n`);
}
