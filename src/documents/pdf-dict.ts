import { MAX_PDF_NESTING } from "./limits.ts";
import { documentProblem } from "./refusal.ts";

/**
 * A PDF dictionary read as pdf.js's lexer reads it (docs/agent.md "Documents"), for the stream
 * pass (`pdf-streams.ts`): white space and comments skipped, literal strings (nested
 * parentheses, backslash escapes) and hex strings stepped over, names with their `#xx` escapes
 * decoded, nested dictionaries and arrays kept whole. Only the top level's entries are returned:
 * a `/Filter` inside a string, a comment or a nested dictionary is not the stream's.
 */
export type PdfValue =
  | { kind: "name"; name: string }
  | { kind: "ref"; num: number; gen: number }
  | { kind: "number"; value: number }
  | { kind: "array"; items: PdfValue[] }
  | { kind: "dict"; entries: Map<string, PdfValue> }
  | { kind: "other" };

const WHITE = new Set(["\0", "\t", "\n", "\f", "\r", " "]);
const DELIMITERS = new Set(["(", ")", "<", ">", "[", "]", "{", "}", "/", "%"]);

/** Whether `c` continues a word (a name, a number, a keyword), as pdf.js's lexer reads one. */
export function isRegular(c: string | undefined): boolean {
  return c !== undefined && !WHITE.has(c) && !DELIMITERS.has(c);
}

/**
 * A reader over `text` from `pos`, never past `end`; every step moves forward, so a read is
 * linear in what it covers. The stream pass bounds each read (a dictionary must close before its
 * `stream` keyword, an object before the next header): an unclosed string read to the end of the
 * file once per stream made a 300 KB file take seconds and a few MB minutes.
 */
export class PdfLexer {
  private readonly end: number;
  /** The dictionaries and arrays open here. */
  private depth = 0;

  constructor(
    private readonly text: string,
    public pos: number,
    end = text.length,
  ) {
    this.end = Math.min(end, text.length);
  }

  /** Past white space and comments. */
  skipWhite(): void {
    const t = this.text;
    while (this.pos < this.end) {
      const c = t[this.pos] as string;
      if (WHITE.has(c)) this.pos++;
      else if (c === "%") {
        while (this.pos < this.end && t[this.pos] !== "\n" && t[this.pos] !== "\r") this.pos++;
      } else return;
    }
  }

  /** The dictionary starting here (`<<`), or undefined when there is none or it does not close. */
  dict(): Map<string, PdfValue> | undefined {
    this.skipWhite();
    if (!this.at("<<")) return undefined;
    this.pos += 2;
    this.enter();
    try {
      return this.entries();
    } finally {
      this.depth--;
    }
  }

  /** A dictionary's entries after its `<<`, through its `>>`. */
  private entries(): Map<string, PdfValue> | undefined {
    const entries = new Map<string, PdfValue>();
    for (;;) {
      this.skipWhite();
      if (this.pos >= this.end) return undefined;
      if (this.at(">>")) {
        this.pos += 2;
        return entries;
      }
      if (this.text[this.pos] !== "/") return undefined;
      const key = this.name();
      const value = this.value();
      if (value === undefined) return undefined;
      // A key given twice: the last, as pdf.js's parser keeps it.
      entries.set(key, value);
    }
  }

  /** The value starting here, `n g R` read as one reference; undefined past the end or at a stray delimiter. */
  value(): PdfValue | undefined {
    this.skipWhite();
    const t = this.text;
    if (this.pos >= this.end) return undefined;
    const c = t[this.pos];
    if (c === "/") return { kind: "name", name: this.name() };
    if (c === "(") return this.literalString() ? { kind: "other" } : undefined;
    if (c === "<") {
      if (this.at("<<")) {
        const entries = this.dict();
        return entries ? { kind: "dict", entries } : undefined;
      }
      while (this.pos < this.end && t[this.pos] !== ">") this.pos++;
      if (this.pos >= this.end) return undefined;
      this.pos++;
      return { kind: "other" };
    }
    if (c === "[") {
      this.pos++;
      this.enter();
      try {
        return this.items();
      } finally {
        this.depth--;
      }
    }
    if (DELIMITERS.has(c as string)) return undefined;
    const word = this.regular();
    const n = Number(word);
    if (word === "" || !/^[+-]?(\d+\.?\d*|\.\d+)$/.test(word)) return { kind: "other" };
    // `n g R`: looked ahead, and stepped back from when it is two numbers and no R.
    const mark = this.pos;
    if (/^\d+$/.test(word)) {
      this.skipWhite();
      const gen = this.regular();
      if (/^\d+$/.test(gen)) {
        this.skipWhite();
        if (this.regular() === "R") return { kind: "ref", num: n, gen: Number(gen) };
      }
      this.pos = mark;
    }
    return { kind: "number", value: n };
  }

  /** An array's items after its `[`, through its `]`. */
  private items(): PdfValue | undefined {
    const items: PdfValue[] = [];
    for (;;) {
      this.skipWhite();
      if (this.pos >= this.end) return undefined;
      if (this.text[this.pos] === "]") {
        this.pos++;
        return { kind: "array", items };
      }
      const item = this.value();
      if (item === undefined) return undefined;
      items.push(item);
    }
  }

  /** One level deeper; past MAX_PDF_NESTING the file is refused. */
  private enter(): void {
    if (++this.depth > MAX_PDF_NESTING)
      throw documentProblem("too_large", `the PDF nests dictionaries or arrays over ${MAX_PDF_NESTING} deep`);
  }

  /** Whether `token` is here, whole before the end. */
  private at(token: string): boolean {
    return this.pos + token.length <= this.end && this.text.startsWith(token, this.pos);
  }

  /** A name from its slash, `#xx` escapes decoded. */
  private name(): string {
    this.pos++;
    const raw = this.regular();
    return raw.replace(/#([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
  }

  /** The run of regular characters here. */
  private regular(): string {
    const t = this.text;
    const start = this.pos;
    while (this.pos < this.end && !WHITE.has(t[this.pos] as string) && !DELIMITERS.has(t[this.pos] as string))
      this.pos++;
    return t.slice(start, this.pos);
  }

  /** Past a literal string; false when it does not close. */
  private literalString(): boolean {
    const t = this.text;
    let depth = 0;
    while (this.pos < this.end) {
      const c = t[this.pos++];
      if (c === "\\") this.pos++;
      else if (c === "(") depth++;
      else if (c === ")" && --depth === 0) return true;
    }
    return false;
  }
}
