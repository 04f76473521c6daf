import { maskedSecrets } from "../plan/secret-args.ts";
import { SECRET_MIN_CHARS, secretSpellings } from "../util/arg-secrets.ts";
import { literalReplacer } from "../util/escape-regexp.ts";
import { LAST_READ_CUT, NOT_LOGGED, UNPARSED } from "../util/llama-quotes.ts";

/**
 * llama-server's log quotes the model's output in a few messages (b10587): a reply that does
 * not match the chat format is written out whole (`common_chat_peg_parse: unparsed <format>
 * output: <text>`, transcripts/quirks/90c; at debug verbosity also `full <format> output
 * triggering error:` with the text on the lines after), and a JSON parse error quotes what it
 * last read (`last read: '<text>'`, nlohmann's messages). What a model writes is the
 * conversation: kept, it would outlive `sessions.delete`/`users.delete` in data_dir/logs and
 * travel in a crash's `log_tail` to whichever chat is running, another user's included. So
 * every line of llama-server's output passes through here before the tail or the file sees it,
 * and those messages keep their shape without their text (docs/supervisor.md, "Logs").
 *
 * A message begins with llama-server's prefix (`M.SS.mmm.uuu L `, on by default since
 * common_init); a quoted text's own newlines give lines without one, which are dropped until
 * the next message begins. The flags that turn the prefix off or log more are the plan's
 * warning (`plan/decide/log-privacy.ts`).
 */

/**
 * The prefix every message of llama-server's own log begins with: time since start, level. A
 * wall clock stepped back past its start makes the time negative, each part printed by `%d` with
 * its sign (`0.-5.-300.-200`, `%03d` of -3 is `-03`): still a message's start.
 */
export const MESSAGE_TIME = String.raw`(-?\d+)\.(\d{2}|-\d{1,2})\.(\d{3}|-\d{2,3})\.(\d{3}|-\d{2,3})`;
const MESSAGE_START = new RegExp(`^${MESSAGE_TIME} [IWED] `);
/** `--log-colors on` wraps the prefix's parts in colour codes. */
const COLOUR = /\u001b\[[0-9;]*m/g;
/** Debug verbosity: the whole reply on the lines after this one. */
const FULL_OUTPUT = /\bfull \S+ output triggering error:/;
/** nlohmann's parse errors: the token it stopped in, up to the line's last quote. */
const LAST_READ = /(last read: )'.*'/s;

// `LAST_READ_CUT`, the same in a part of a line cut for length (log-sink.ts `readLines`), and the
// redaction of one message live a floor down (util/llama-quotes.ts), for the store's logs too.
export { NOT_LOGGED, withoutQuotes } from "../util/llama-quotes.ts";

/** One output stream's redactor: it remembers whether it is inside a quoted text. */
export class LogRedactor {
  private inQuote = false;
  /** The quote's message's time (µs since llama-server's start): a later message's is not less. */
  private quoteAt = 0;
  /** The wall clock's step (ms) as the line before the quote's saw it, and the lowest since. */
  private lastStep = 0;
  private quoteStep = 0;
  private lowStep = 0;

  /**
   * `clocks.uptimeMs`: time since just before llama-server was spawned, which no message of its own can
   * exceed. A quoted text's line that forges the prefix (a model's output, a document it was
   * told to repeat) must then name a time between the quote's and now, to the microsecond:
   * without that check it ended the redaction, the rest of the text kept in the log and read by
   * rpc-watch (a forged `Remote RPC server crashed` restarted a healthy server).
   */
  constructor(private readonly clocks?: SpawnClocks) {}

  /**
   * The line as it may be kept, or null when it belongs to a text no log may keep. `cut`: it is
   * a part of a longer line, the rest in the lines after (which begin with no prefix).
   */
  line(line: string, cut = false): string | null {
    const prefix = MESSAGE_START.exec(line.includes("\u001b") ? line.replace(COLOUR, "") : line);
    const at = prefix ? micros(prefix) : 0;
    const step = this.clocks?.wallStepMs() ?? 0;
    if (this.inQuote) {
      this.lowStep = Math.min(this.lowStep, step);
      if (!(prefix && this.realAt(at))) return null;
    }
    // The larger of the steps before and at this line: one between the quote's message being
    // written and read is then counted as a step back, never the other way.
    this.quoteStep = Math.max(this.lastStep, step);
    this.lowStep = step;
    this.lastStep = step;
    this.inQuote = false;
    // A line with no prefix (a cut line's later part) goes on its message: its time is that one's.
    if (prefix) this.quoteAt = at;
    const unparsed = UNPARSED.exec(line);
    if (unparsed) {
      this.inQuote = true;
      return `${unparsed[1]}${NOT_LOGGED}`;
    }
    if (FULL_OUTPUT.test(line)) this.inQuote = true;
    if (cut && LAST_READ_CUT.test(line)) {
      this.inQuote = true;
      return line.replace(LAST_READ_CUT, `$1${NOT_LOGGED}`);
    }
    return line.replace(LAST_READ, `$1${NOT_LOGGED}`);
  }

  /**
   * Whether a message at `at` (µs) may be llama-server's own, after the quote's. Its prefix is its
   * wall clock's (common/log.cpp `t_us`, system_clock): a step back since the quote, as
   * `wallStepMs` saw it, lowers the bound by as much and no more, so a line of the quote forging
   * an earlier time still stays in it. The upper bound is the wall clock's time since the spawn
   * (1 ms coarse), raised by that step alone: the uptime stays ahead of the prefix by every step
   * back before the quote, which let a forged line name any time up to it (`0.00.000.000` after
   * a step past llama-server's start).
   */
  private realAt(at: number): boolean {
    if (!this.clocks) return true;
    const stepBack = Math.max(0, this.quoteStep - this.lowStep) * 1000;
    const wallMs = this.clocks.uptimeMs() + Math.min(0, this.clocks.wallStepMs() + 1);
    return at >= this.quoteAt - stepBack && at <= wallMs * 1000 + stepBack;
  }
}

/**
 * The clocks a redactor bounds a message's time by, started just before llama-server's spawn.
 * `uptimeMs`: the larger of two clocks' time since, one may stop while the machine sleeps where
 * llama-server's does not. `wallStepMs`: how far the wall clock (the prefix's) moved beside the
 * monotonic one since, below 0 after a step back.
 */
export interface SpawnClocks {
  uptimeMs(): number;
  wallStepMs(): number;
}

export function spawnClocks(): SpawnClocks {
  const mono = performance.now();
  const wall = Date.now();
  return {
    uptimeMs: () => Math.max(performance.now() - mono, Date.now() - wall),
    wallStepMs: () => Date.now() - wall - (performance.now() - mono),
  };
}

/** The prefix's time (`M.SS.mmm.uuu`) in microseconds; a negative one's parts share its sign. */
function micros(prefix: RegExpExecArray): number {
  const [m, s, ms, us] = prefix.slice(1, 5).map(Number) as [number, number, number, number];
  return ((m * 60 + s) * 1000 + ms) * 1000 + us;
}

/**
 * Each of llama-server's lines with the secrets of its arguments (`maskedSecrets`) and the launch's
 * key shown as `[redacted]`: it quotes an argument it refuses (`invalid argument: --api-keyy=…`)
 * and a URL it downloads from, and its log goes to a file and, in a failed start's `log_tail`, to
 * the host. As written, as a URL escapes it (`secretSpellings`), and with `_` as `-`: llama-server
 * rewrites a `--` argument so before it reads or quotes it. SECRET_MIN_CHARS or more only.
 */
export function secretHider(args: readonly string[], apiKey: string): SecretHider {
  const values = [...maskedSecrets(args), apiKey];
  const spelt = secretSpellings([...values, ...values.map((v) => v.replaceAll("_", "-"))]).filter(
    (s) => s.length >= SECRET_MIN_CHARS,
  );
  return Object.assign(literalReplacer(spelt, "[redacted]"), {
    longest: Math.max(0, ...spelt.map((s) => s.length)),
  });
}

/** Hides the secrets it knows in a text; `longest`: the longest spelling it hides, in characters. */
export type SecretHider = ((text: string) => string) & { readonly longest: number };
