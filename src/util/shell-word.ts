/**
 * Text as a POSIX shell reads it as one word, for a command in a fix line that people paste:
 * `chmod 700 /home/u/my data` changed /home/u/my and ./data. Plain paths stay as they are; any
 * other is single-quoted, a quote inside written as '\''.
 */
export function shellWord(text: string): string {
  if (/^[\w./+,:@%=-]+$/.test(text)) return text;
  return `'${text.replaceAll("'", "'\\''")}'`;
}
