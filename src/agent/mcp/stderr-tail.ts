import { argSecrets, SECRET_MIN_CHARS, secretSpellings } from "../../util/arg-secrets.ts";
import { terminalTextCut } from "../../util/terminal-text.ts";
import { cutText } from "../../util/text-cut.ts";

/** Lines of its stderr a failed start's error quotes: a traceback's last lines say what went wrong. */
export const TAIL_LINES = 5;
/** Characters of each quoted line. */
const LINE_CHARS = 200;
/** What is kept of the stream: enough for TAIL_LINES lines, bounded whatever the server writes. */
export const KEEP_CHARS = TAIL_LINES * LINE_CHARS * 2;

/**
 * What a message about a server must not show: its `env`'s values (API keys) and its `args`'
 * credentials (arg-secrets.ts), each also as a URL carries it (secretSpellings), the longest
 * first, so one that holds another goes whole. Each also trimmed: a key read from a file keeps
 * its newline in the config, and the server that strips it echoes the key without. And each line
 * of one of several (a PEM key): the debug log logs whole lines as they come, so a key written a
 * line at a time was never seen whole there, and a server may prefix each line it echoes.
 */
export function configSecrets(env: Record<string, string> = {}, args: readonly string[] = []): string[] {
  const secrets = [...Object.values(env), ...argSecrets(args)]
    .flatMap((v) => [
      v,
      v.trim(),
      ...(/[\r\n]/.test(v.trim()) ? v.split(/\r?\n|\r/).map((l) => l.trim()) : []),
    ])
    .filter((v) => v.length >= SECRET_MIN_CHARS);
  return secretSpellings(secrets);
}

/**
 * A server's command line as the words configSecrets looks through: its `args`, after its
 * `command`'s own words, for a whole line written into `command` (`npx -y server --api-key sk-…`),
 * which a spawn that cannot find it quotes ("Executable not found in $PATH: …"). Then each
 * argument's words, for a flag and its value written as one (`"--api-key sk-…"`), which the
 * server's parser refuses quoting it ("unrecognized arguments: …").
 */
export function commandLineOf(cfg: { command: string; args?: readonly string[] }): string[] {
  const args = cfg.args ?? [];
  const words = args.filter((a) => /\s/.test(a.trim())).flatMap((a) => a.trim().split(/\s+/));
  return [...cfg.command.split(/\s+/), ...args, ...words];
}

/** `text` with each of `secrets` (configSecrets) shown as `[redacted]`. */
export function withoutSecrets(text: string, secrets: readonly string[]): string {
  let shown = text;
  for (const secret of secrets) shown = shown.replaceAll(secret, "[redacted]");
  return shown;
}

/**
 * `text`, the start of a longer one, with a secret it ends inside (begun in its first `shown`
 * characters) shown as `[redacted]` from there: that part matches no whole value, and a cut of the
 * text to `shown` characters would show it.
 */
export function withoutCutEnd(text: string, secrets: readonly string[], shown: number): string {
  for (let at = 0; at < Math.min(shown, text.length); at++) {
    const rest = text.slice(at);
    if (secrets.some((s) => s.length > rest.length && s.startsWith(rest)))
      return `${text.slice(0, at)}[redacted]`;
  }
  return text;
}

/**
 * The end of what an MCP server wrote to stderr, for the error of a server that exited during its
 * start (docs/agent.md "MCP servers"): a missing module or a bad argument is told there, and the
 * `tools_unavailable` warning is all a host developer sees without the debug log.
 */
export class StderrTail {
  private text = "";
  /** Whether the stream's start was let go: the kept text may then begin inside a secret. */
  private cut = false;
  private readonly secrets: string[];

  /**
   * `env`: the server's configured environment, whose values (API keys) a traceback may echo;
   * `args`: its arguments, whose credentials an argument parser's error echoes (arg-secrets.ts).
   */
  constructor(env: Record<string, string> = {}, args: readonly string[] = []) {
    this.secrets = configSecrets(env, args);
  }

  add(chunk: string): void {
    const text = this.text + chunk;
    if (text.length > KEEP_CHARS) this.cut = true;
    this.text = text.slice(-KEEP_CHARS);
  }

  /**
   * Its last non-blank lines, each cut, C0 controls shown as U+FFFD, bidi overrides and C1
   * controls escaped (terminalText: a host shows them) within the cut, the env's values as [redacted].
   */
  lines(): string[] {
    const text = withoutSecrets(this.cut ? this.withoutCutSecret(this.text) : this.text, this.secrets);
    return text
      .split(/\r?\n|\r/)
      .map((l) => l.trimEnd())
      .filter((l) => l.length > 0)
      .slice(-TAIL_LINES)
      .map((l) =>
        terminalTextCut(
          cutText(l, LINE_CHARS)
            .toWellFormed()
            .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "\ufffd"),
          LINE_CHARS,
        ),
      );
  }

  /**
   * `text` without the end of a secret it begins with: where the kept text was cut inside a
   * value, what is left of it matches no whole value and would be shown (a hostile review).
   */
  private withoutCutSecret(text: string): string {
    let drop = 0;
    for (const secret of this.secrets) {
      for (let n = secret.length - 1; n > drop; n--) {
        if (text.startsWith(secret.slice(-n))) {
          drop = n;
          break;
        }
      }
    }
    return text.slice(drop);
  }
}

/** The most of an unended line held back for the debug log before it is logged as it stands. */
export const MAX_DEBUG_LINE_CHARS = 8 * 1024;

/**
 * A server's stderr as the debug log gets it, its config's secrets `[redacted]` as in the tail: a
 * debug log is what a host developer pastes into an issue. Whole lines are logged, so a secret the
 * server wrote in two chunks is still seen whole; an unended line past MAX_DEBUG_LINE_CHARS is
 * logged without its last (longest secret − 1) characters, which wait for the rest (so one is
 * held for as long as that when the longest secret is longer than the bound).
 */
export class StderrDebugLog {
  private pending = "";
  private readonly secrets: string[];
  private readonly hold: number;

  constructor(
    private readonly log: (line: string) => void,
    env: Record<string, string> = {},
    args: readonly string[] = [],
  ) {
    this.secrets = configSecrets(env, args);
    this.hold = Math.max(0, (this.secrets[0]?.length ?? 0) - 1);
  }

  add(chunk: string): void {
    this.pending += chunk;
    const end = this.pending.lastIndexOf("\n");
    if (end >= 0) {
      this.emit(this.pending.slice(0, end));
      this.pending = this.pending.slice(end + 1);
    }
    if (this.pending.length <= MAX_DEBUG_LINE_CHARS) return;
    // Redacted first: a secret that begins before the held end lies whole in it and goes.
    const shown = withoutSecrets(this.pending, this.secrets);
    const cut = shown.length - this.hold;
    // A secret longer than the bound (a certificate in env) may still be coming: all of it waits,
    // where slice's negative end logged all but the last few of its characters. Kept redacted,
    // so copies of it written over and over wait as `[redacted]`s, not whole.
    this.emit(shown.slice(0, Math.max(0, cut)));
    this.pending = shown.slice(Math.max(0, cut));
  }

  /** The stream ended: what is left of its last line. */
  end(): void {
    this.emit(this.pending);
    this.pending = "";
  }

  private emit(text: string): void {
    const shown = withoutSecrets(text, this.secrets).trimEnd();
    if (shown !== "") this.log(shown);
  }
}
