import { isTerminalSafe, terminalText } from "../util/terminal-text.ts";
import { MESSAGE_TIME } from "./log-redact.ts";

/**
 * One line of llama-server's output as the log file and the tail (a failed start's `log_tail`)
 * keep it. llama-server prints what a GGUF from the hub says (`general.name str = …`, a chat
 * template's error), so a line may hold ESC or C1 sequences (U+009B opens one as ESC [ does):
 * written raw, they drove the terminal of whoever `cat`s or `tail`s the log. Every control is
 * written as `\u{…}` (terminal-text.ts), but for the colour codes `--log-colors on` puts in the
 * message prefix (llama.cpp common/log.cpp: `M.SS.mmm.uuu L `, its parts coloured), which
 * log-redact.ts reads the message start through: there only the codes llama-server writes
 * (reset, bold, a foreground colour 31 to 37) stay, a reset or more before it too (a warning's
 * reset comes after its newline, at the next line's start). A reply or a file's text can forge
 * the prefix, but no more than colour it so.
 */
export function llamaLogLine(line: string): string {
  if (isTerminalSafe(line)) return line;
  const prefix = COLOURED_PREFIX.exec(line)?.[0] ?? LEADING_RESETS.exec(line)?.[0] ?? "";
  const kept = prefix.replace(ANY_CSI, (code) => (OWN_COLOUR.test(code) ? code : terminalText(code)));
  return kept + terminalText(line.slice(prefix.length));
}

/**
 * The program and arguments the log's start line (`--- <time> start …`) names: a model's path
 * (a chat may name any file) may hold the same controls.
 */
export function startLineText(text: string): string {
  return terminalText(text);
}

const SGR = "(?:\\u001b\\[[0-9;]*m)*";
/** log-redact.ts's message start, with colour codes (any, checked below) around its parts. */
const COLOURED_PREFIX = new RegExp(`^${SGR}${MESSAGE_TIME}${SGR} ${SGR}[IWED] ${SGR}`);
const LEADING_RESETS = /^(?:\u001b\[0?m)+/;
const ANY_CSI = /\u001b\[[0-9;]*m/g;
/** common/log.cpp's g_col: default (0), bold (1), red … white (31 to 37). */
const OWN_COLOUR = /^\u001b\[(?:0|1|3[1-7])?m$/;
