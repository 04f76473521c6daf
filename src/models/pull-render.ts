import type { FitVerdict } from "../protocol/fit-verdict.ts";
import type { DownloadProgress } from "../protocol/pull.ts";
import { terminalSafe, terminalText } from "../util/terminal-text.ts";
import type { PullOutcome } from "./pull.ts";

/**
 * What `local-ai pull` prints: a bar redrawn in place on a terminal, a plain line every few
 * seconds (and at each phase change) otherwise, and the result. Pure text; the command writes it.
 * File names are the hub's (its listing refuses C0 controls only): each is shown through
 * terminalText, so a U+009B or a bidi override in one cannot drive or reorder the terminal.
 */

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

export function humanBytes(n: number): string {
  if (n >= GIB) return `${(n / GIB).toFixed(2)} GiB`;
  if (n >= MIB) return `${(n / MIB).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}

export function humanSeconds(s: number | null): string {
  if (s === null) return "--:--";
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = Math.floor(s % 60);
  const mm = String(m).padStart(2, "0");
  const ss = String(sec).padStart(2, "0");
  return h > 0 ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

const PHASE_WORD = { download: "", check: "verifying ", wait: "waiting for another pull " } as const;

function label(p: DownloadProgress): string {
  const name = terminalText(p.file.split("/").pop()!);
  return p.parts > 1 ? `${name} (${p.part}/${p.parts})` : name;
}

function percent(p: DownloadProgress): number {
  return p.total > 0 ? Math.min(100, (p.bytes_done / p.total) * 100) : 100;
}

/** One plain line: `model.gguf  42.0%  420.0 MiB / 1000.0 MiB  12.3 MiB/s  ETA 00:47`. */
export function progressLine(p: DownloadProgress): string {
  const rate = p.phase === "check" ? "" : `  ${humanBytes(p.bytes_per_s)}/s  ETA ${humanSeconds(p.eta_s)}`;
  return `${PHASE_WORD[p.phase]}${label(p)}  ${percent(p).toFixed(1)}%  ${humanBytes(p.bytes_done)} / ${humanBytes(p.total)}${rate}`;
}

/** The bar for a terminal `width` columns wide (no newline; the caller returns the carriage). */
export function progressBar(p: DownloadProgress, width: number): string {
  const tail = ` ${percent(p).toFixed(0).padStart(3)}% ${humanBytes(p.bytes_done)}/${humanBytes(p.total)} ${humanBytes(p.bytes_per_s)}/s ${humanSeconds(p.eta_s)}`;
  const head = `${PHASE_WORD[p.phase]}${label(p)} `;
  const room = Math.max(10, width - head.length - tail.length - 2);
  const filled = Math.round((percent(p) / 100) * room);
  return cutToColumns(`${head}[${"#".repeat(filled)}${"-".repeat(room - filled)}]${tail}`, width - 1);
}

/**
 * `text` cut to what `columns` terminal columns show: a wide character (CJK in a file's name)
 * takes two, and a pair of UTF-16 halves is never split. Any wider and the terminal wraps the bar,
 * and each redraw then adds a line.
 */
export function cutToColumns(text: string, columns: number): string {
  let used = 0;
  let out = "";
  for (const ch of text) {
    used += Bun.stringWidth(ch);
    if (used > columns) break;
    out += ch;
  }
  return out;
}

/** Plain output prints at most a line every this often, plus one at each phase or file change. */
const PLAIN_EVERY_MS = 2000;

export class ProgressPrinter {
  private lastPlain = Number.NEGATIVE_INFINITY;
  private lastKey = "";
  private drawn = false;

  constructor(
    private readonly write: (text: string) => void,
    private readonly tty: { columns: number } | null,
    private readonly now: () => number = Date.now,
  ) {}

  show(p: DownloadProgress): void {
    const key = `${p.file}|${p.phase}`;
    if (this.tty) {
      if (this.drawn && key !== this.lastKey) this.write("\n");
      this.write(`\r${progressBar(p, this.tty.columns)}\x1b[K`);
      this.drawn = true;
    } else {
      const t = this.now();
      const last = p.bytes_done >= p.total && p.phase === "download";
      if (key === this.lastKey && t - this.lastPlain < PLAIN_EVERY_MS && !last) return;
      this.lastPlain = t;
      this.write(`${progressLine(p)}\n`);
    }
    this.lastKey = key;
  }

  /** Ends the bar's line before anything else is printed. */
  end(): void {
    if (this.drawn) this.write("\n");
    this.drawn = false;
  }
}

export function renderVerdict(fit: FitVerdict): string {
  if (fit.fits === null) return fit.message;
  if (fit.fits) return fit.message;
  return `does not fit this machine: ${fit.message}`;
}

/** `hfRef`: the reference as `hf:org/name:QUANT`, which config.yaml may name instead of the path. */
export function renderPulled(given: PullOutcome & { fit: FitVerdict }, hfRef?: string): string {
  const o = terminalSafe(given);
  const lines = [
    `pulled ${o.repo}@${o.revision} (${o.commit.slice(0, 12)}): ${humanBytes(o.size_bytes)}`,
    ...o.files.map((f) => `  ${f.path}\n    sha256 ${f.sha256}`),
    ...o.warnings.map((w) => `note: ${w}`),
    `fit: ${renderVerdict(o.fit)}`,
    `use it: model.path: ${o.path}`,
    ...(hfRef ? [`    or: model.path: ${hfRef}`] : []),
    // mmproj: auto finds it in the same snapshot (docs/models.md "The projector").
    ...(o.mmproj ? [`vision projector: ${o.mmproj} (mmproj: auto uses it)`] : []),
  ];
  return lines.join("\n") + "\n";
}
